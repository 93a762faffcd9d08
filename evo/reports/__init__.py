"""Owns what a run leaves for people: its outcome record, the full-size check, anytime curves, confidence intervals,
the console table, the report and the HTML page helper with its templates. It may import core, hardware_profiles,
fitness, operators and seeds, and of evo/ evo.settings and the subpackages below it (evo.records, evo.service,
evo.tuning, evo.evolution); the order of evo/ bottom up: records, service, tuning, evolution, reports, benchmark,
runs (tests/test_layers.py)."""
