"""Owns the Optuna study per individual over its launch parameters, and what finished tunings leave for later ones.
It may import core, hardware_profiles, fitness, operators and seeds, and of evo/ evo.settings and the subpackages
below it (evo.records, evo.service); the order of evo/ bottom up: records, service, tuning, evolution, reports,
benchmark, runs (tests/test_layers.py)."""
