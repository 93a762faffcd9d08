"""Owns the search itself: the steady-state loop, selection, strategies, the stopping rule and the DEAP toolbox. It
may import core, hardware_profiles, fitness, operators and seeds, and of evo/ evo.settings and the subpackages below
it (evo.records, evo.service, evo.tuning); the order of evo/ bottom up: records, service, tuning, evolution,
reports, benchmark, runs (tests/test_layers.py)."""
