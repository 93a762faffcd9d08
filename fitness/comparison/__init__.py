"""Owns the precision policies and the output comparison (the one-pass Triton statistics kernel and the per-dtype
tolerances). It imports only the subpackages below it in fitness/'s order, and that layer's root settings (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
