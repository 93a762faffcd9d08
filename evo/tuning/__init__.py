"""Owns the Optuna study per individual over its launch parameters, and what finished tunings leave for later ones. It
imports only the subpackages below it in evo/'s order, and that layer's root settings (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
