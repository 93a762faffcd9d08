"""Owns the judge inside a worker: the judging of one candidate (``fitness.judge.pipeline.judge``), loading the
candidate, the static check, the guards and per-call checks, the inputs, the correctness and coverage trials (TF32
emulated for them), the rounding second opinion, a forward's random draws (seeded alike for reference and candidate),
the integrity check and compiling ahead. It imports only the subpackages below it in fitness/'s order, and that
layer's root settings (the order: docs/architecture.md, checked by tests/project/test_layers.py)."""
