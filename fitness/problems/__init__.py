"""Owns problems: loading KernelBench files and the bundled suite, the CPU interpreter's sizes, the dependence of
the output on the inputs, the speed-of-light figures and the search's target. It may import core and
hardware_profiles, and of fitness/ fitness.settings and the subpackages below it (fitness.common,
fitness.comparison); the order of fitness/ bottom up: common, comparison, problems, measure, judge, workers,
evaluation (tests/test_layers.py)."""
