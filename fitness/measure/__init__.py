"""Owns timing: the timers, the memory plan of timing inputs, the baselines and their cache on the machine, and the
result record of one evaluation. It imports only the subpackages below it in fitness/'s order, and that layer's root
settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
