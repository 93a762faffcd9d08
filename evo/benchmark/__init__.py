"""Owns many runs at once: the bench (local and Ray backends, its Ctrl-C and its table), a multirun's combined page
and the strategies experiment's table. It may import core, hardware_profiles, fitness, operators and seeds, and of
evo/ evo.settings and the subpackages below it (evo.records, evo.service, evo.tuning, evo.evolution, evo.reports);
the order of evo/ bottom up: records, service, tuning, evolution, reports, benchmark, runs
(tests/test_layers.py)."""
