"""Owns a run wired from its config (store, service, tuner, operators, seeds, search, outcome), its generation 0 and
its live progress. It may import core, hardware_profiles, fitness, operators and seeds, and of evo/ evo.settings and
the subpackages below it (evo.records, evo.service, evo.tuning, evo.evolution, evo.reports, evo.benchmark); the
order of evo/ bottom up: records, service, tuning, evolution, reports, benchmark, runs (tests/test_layers.py)."""
