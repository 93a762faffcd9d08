"""Owns many runs at once: the bench (local and Ray backends, its Ctrl-C and its table), a multirun's combined page and
the strategies experiment's table. It imports only the subpackages below it in evo/'s order, and that layer's root
settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
