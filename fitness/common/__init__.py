"""Owns what every part of a job shares: files written whole, figures formatted for people, a child's lifeline to
its parent, the stage names and the per-GPU lock. It may import core and hardware_profiles, and of fitness/
fitness.settings only; the order of fitness/ bottom up: common, comparison, problems, measure, judge, workers,
evaluation (tests/test_layers.py)."""
