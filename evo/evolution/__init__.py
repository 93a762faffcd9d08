"""Owns the search itself: the steady-state loop, selection, strategies, the stopping rule and the DEAP toolbox. It
imports only the subpackages below it in evo/'s order, and that layer's root settings (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
