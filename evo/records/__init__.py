"""Owns the run store (one SQLite database per run), the checkpoint record, the claim a command holds on its directory
and the manifest every figure carries. It imports only the subpackages below it in evo/'s order, and that layer's
root settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
