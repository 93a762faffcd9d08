"""kernelevo: evolutionary search with LLM mutation operators for faster, verified Triton kernels. This package is the
command, the top layer: it may import every layer below it and nothing imports it; under its namespace live two lower
layers of their own, the data model (``kernelevo.core``, the bottom layer) and the seed sources (``kernelevo.seeds``)
(the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
__version__ = "0.1.0"
