"""Owns the evaluator (one problem, one policy, one device: candidates in, result records out), its construction from
a config and the notebook's one call (``fitness.evaluation.notebook.judge_source``). It imports only the subpackages
below it in fitness/'s order, and that layer's root settings (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
