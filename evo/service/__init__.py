"""Owns the evaluation service the search submits to: the local pool, its Ray backend, the replay of an earlier
run's measurements and Ray's connection. It may import core, hardware_profiles, fitness, operators and seeds, and of
evo/ evo.settings and the subpackages below it (evo.records); the order of evo/ bottom up: records, service, tuning,
evolution, reports, benchmark, runs (tests/test_layers.py)."""
