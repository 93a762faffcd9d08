"""The judge layer: problems, sandboxed workers, correctness, guards, timing and baselines. It may import core and
hardware_profiles. Its subpackages, bottom up, each importing only those below it and the root's settings
(fitness.settings, which imports none of them): common, comparison, problems, measure, judge, workers, evaluation;
fitness/suite/ holds the bundled problems (data) (docs/architecture.md; tests/test_layers.py)."""
