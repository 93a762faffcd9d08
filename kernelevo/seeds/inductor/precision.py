"""A seed's dot products in IEEE fp32 instead of TF32: its way out when TF32 cannot meet the tolerance.

Under a policy that allows TF32, Inductor's GEMM templates multiply fp32 tiles on TF32 tensor cores
(``ALLOW_TF32: tl.constexpr = True``); over a long reduction (level2/14: a sum of 8,192 products) the result can
miss the tolerance that plain fp32 dot products meet. ``ieee_dots`` rewrites every TF32 choice of a seed's kernels
(the templates' constant, ``allow_tf32=True``, ``input_precision="tf32"``/``"tf32x3"``) to IEEE fp32;
``evo.runs.seeding`` judges the rewrite where the seed itself is incorrect.
"""
from __future__ import annotations

import re

TF32_CHOICES = [
    (re.compile(r"\bALLOW_TF32\s*:\s*tl\.constexpr\s*=\s*True\b"), "ALLOW_TF32: tl.constexpr = False"),
    (re.compile(r"\ballow_tf32\s*=\s*True\b"), "allow_tf32=False"),
    (re.compile(r"""\binput_precision\s*=\s*(['"])tf32(x3)?\1"""), "input_precision='ieee'"),
]
IEEE_NOTE = "# kernelevo: dot products in IEEE fp32 (the seed's TF32 dot products missed the tolerance)\n"


def ieee_dots(source: str) -> str | None:
    """`source` with every TF32 dot product in IEEE fp32, under a header saying so; None where it has none."""
    rewritten = source
    for pattern, ieee in TF32_CHOICES:
        rewritten = pattern.sub(ieee, rewritten)
    return None if rewritten == source else IEEE_NOTE + rewritten
