"""Owns timing: the timers, the memory plan of timing inputs, the baselines and their cache on the machine, the
records that cross a worker's boundary, and an evaluation's verdict for people. It imports only the subpackages
below it in fitness/'s order, and that layer's root settings (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
