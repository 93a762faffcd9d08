"""The search layer: everything around a run. Its subpackages and the root's settings (evo.settings, evo.plan), and
what each may import: docs/architecture.md, checked by tests/project/test_layers.py."""
