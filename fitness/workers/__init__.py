"""Owns the sandbox: the fork server, the worker processes and what a worker does with its job, their confinement,
environment, clocks, warm-up and the Nsight Compute profiling run. It may import core and hardware_profiles, and of
fitness/ fitness.settings and the subpackages below it (fitness.common, fitness.comparison, fitness.problems,
fitness.measure, fitness.judge); the order of fitness/ bottom up: common, comparison, problems, measure, judge,
workers, evaluation (tests/test_layers.py)."""
