"""Owns the sandbox: the fork server, the worker processes and what a worker does with its job, their confinement,
environment, clocks, warm-up and the Nsight Compute profiling run. It imports only the subpackages below it in
fitness/'s order, and that layer's root settings (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
