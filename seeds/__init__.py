"""Seed sources: where a search's generation 0 comes from besides a seed file. ``inductor``: torch.compile's Triton
kernels, captured and converted into standalone candidates. Above the judge (fitness) and the data model (core),
below the search (evo), which makes its seeds with it; no operator imports it."""
