"""Owns what a run leaves for people: its outcome record, the full-size check, anytime curves, confidence intervals, the
console table, the report and the HTML page helper with its templates. It imports only the subpackages below it in
evo/'s order, and that layer's root settings (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
