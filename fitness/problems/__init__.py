"""Owns problems: loading KernelBench files and the bundled suite, the CPU interpreter's sizes, the dependence of the
output on the inputs, the speed-of-light figures and the search's target. It imports only the subpackages below it in
fitness/'s order, and that layer's root settings (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
