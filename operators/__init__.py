"""Variation operators: turn parent genomes into child genomes (offline mutations and crossover, and later LLM ones)."""
from operators.base import Operator, OperatorContext

__all__ = ["Operator", "OperatorContext"]
