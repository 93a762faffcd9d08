"""Owns the evaluator (one problem, one policy, one device: candidates in, result records out) and its construction
from a config. It may import core and hardware_profiles, and of fitness/ fitness.settings and the subpackages below
it (fitness.common, fitness.comparison, fitness.problems, fitness.measure, fitness.judge, fitness.workers); the
order of fitness/ bottom up: common, comparison, problems, measure, judge, workers, evaluation
(tests/test_layers.py)."""
