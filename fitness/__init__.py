"""The judge layer: problems, sandboxed workers, correctness, guards, timing and baselines; fitness/suite/ holds
the bundled problems (data). Its subpackages and the root's settings (fitness.settings), and what each may import:
docs/architecture.md, checked by tests/project/test_layers.py."""
