"""Owns the precision policies and the output comparison (the one-pass Triton statistics kernel and the per-dtype
tolerances). It may import core and hardware_profiles, and of fitness/ fitness.settings and the subpackages below it
(fitness.common); the order of fitness/ bottom up: common, comparison, problems, measure, judge, workers, evaluation
(tests/test_layers.py)."""
