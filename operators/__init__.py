"""Variation operators: turn parent genomes into child genomes (offline mutations and crossover, and the LLM team of
``operators.llm``). It imports only the layers below it, never its peer the seed sources (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
from operators.base import Operator, OperatorContext

__all__ = ["Operator", "OperatorContext"]
