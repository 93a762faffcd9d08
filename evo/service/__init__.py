"""Owns the evaluation service the search submits to: the local pool, its Ray backend, the replay of an earlier run's
measurements and Ray's connection. It imports only the subpackages below it in evo/'s order, and that layer's root
settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
