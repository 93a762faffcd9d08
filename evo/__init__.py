"""The search layer: everything around a run. It may import core, hardware_profiles, fitness, operators and seeds.
Its subpackages, bottom up, each importing only those below it and the root's settings (evo.settings, the search's
settings, which imports none of them): records, service, tuning, evolution, reports, benchmark, runs
(docs/architecture.md; tests/test_layers.py)."""
