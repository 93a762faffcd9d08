"""Owns timing: the timers, the memory plan of timing inputs, the baselines and their cache on the machine, and the
result record of one evaluation. It may import core and hardware_profiles, and of fitness/ fitness.settings and the
subpackages below it (fitness.common, fitness.comparison, fitness.problems); the order of fitness/ bottom up:
common, comparison, problems, measure, judge, workers, evaluation (tests/test_layers.py)."""
