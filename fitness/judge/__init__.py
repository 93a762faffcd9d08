"""Owns the judge inside a worker: loading the candidate, the static check, the guards and per-call checks, the
inputs, the correctness and coverage trials (TF32 emulated for them), the rounding second opinion, a forward's random
draws (seeded alike for reference and candidate), the integrity check and compiling ahead.
It may import core and hardware_profiles, and of fitness/ fitness.settings and the subpackages below it
(fitness.common, fitness.comparison, fitness.problems, fitness.measure); the order of fitness/ bottom up: common,
comparison, problems, measure, judge, workers, evaluation (tests/test_layers.py)."""
