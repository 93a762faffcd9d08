"""Seed sources: where a search's generation 0 comes from besides a seed file. ``inductor``: torch.compile's Triton
kernels, captured and converted into standalone candidates; ``kernels``: kernelevo's own kernels a seed holds a copy of.
It imports only the layers below it, never its peer the operators (the order: docs/architecture.md, checked by
tests/project/test_layers.py)."""
