"""Owns what every part of a job shares: files written whole, figures formatted for people, a child's lifeline to its
parent, the stage names and the per-GPU lock. It imports only the subpackages below it in fitness/'s order, and that
layer's root settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
