"""Owns the run store (one SQLite database per run), the checkpoint record, the claim a command holds on its
directory and the manifest every figure carries. It may import core, hardware_profiles, fitness, operators and
seeds, and of evo/ evo.settings only; the order of evo/ bottom up: records, service, tuning, evolution, reports,
benchmark, runs (tests/test_layers.py)."""
