"""Owns a run wired from its config (store, service, tuner, operators, seeds, search, outcome), its generation 0 and its
live progress. It imports only the subpackages below it in evo/'s order, and that layer's root settings (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
