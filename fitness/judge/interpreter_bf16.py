"""bf16 on Triton's CPU interpreter, computed as a GPU computes it: ``tl.dot``'s bf16 operands and the cast to bf16.

The interpreter keeps a bf16 tensor as its raw bits (numpy has no bf16: ``uint16``), and its ``tl.dot`` multiplied
those bits as integers: a bf16 dot of 16 x 16 normal values came out near 1e10, so an honest bf16-dot kernel failed
every trial on the CPU (issue 63). ``install`` widens each bf16 operand of a dot to fp32 first, with the interpreter's
own cast (exact: a bf16 is an fp32 whose low 16 bits are zero), which is what a GPU's tensor cores do (the products
exact in fp32, summed in fp32); a bf16 accumulator is widened alike and the result rounded back to bf16. And the
interpreter's cast from fp32 to bf16 (``x.to(tl.bfloat16)``) truncated, where a GPU rounds to the nearest even: about
half of a randn draw's values came out one bf16 step off, towards zero; it rounds to the nearest even now (NaN stays
NaN). fp16 and fp8 were right already and are left to the interpreter, as is a cast with an explicit rounding mode
(``fp_downcast_rounding``). Installed once in every worker on the interpreter (``fitness.workers.worker``), before the
judge records its state (``fitness.judge.integrity``).
"""
from __future__ import annotations

import os

import numpy as np

_INSTALLED: list = []


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """fp32 `values` rounded to bf16, to the nearest even, as uint16 bits (NaN stays a quiet NaN of its sign)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = np.isnan(values)
    rounded = np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x0040), rounded)
    return rounded.astype(np.uint16)


def install() -> bool:
    """Patch the interpreter's dot and its cast (once per process; only under ``TRITON_INTERPRET=1``). False where
    this Triton's interpreter has no ``create_dot`` or ``cast_impl`` to patch (then its own run, bf16 included)."""
    if _INSTALLED or os.environ.get("TRITON_INTERPRET") != "1":
        return bool(_INSTALLED)
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    dot, cast = getattr(builder, "create_dot", None), getattr(builder, "cast_impl", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if dot is None or cast is None or handle is None:
        return False

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return handle(to_bf16_bits(src.data), dst_type.scalar)
        return cast(self, src, dst_type)

    def create_dot(self, a, b, d, *args, **kwargs):
        def wide(operand):
            return cast(self, operand, tl.float32) if operand.dtype.scalar == tl.bfloat16 else operand

        narrow = d.dtype.scalar == tl.bfloat16
        if tl.bfloat16 not in (a.dtype.scalar, b.dtype.scalar) and not narrow:
            return dot(self, a, b, d, *args, **kwargs)
        result = dot(self, wide(a), wide(b), wide(d), *args, **kwargs)
        return cast_impl(self, result, tl.bfloat16) if narrow else result

    cast_impl.__wrapped__, create_dot.__wrapped__ = cast, dot
    builder.cast_impl, builder.create_dot = cast_impl, create_dot
    _INSTALLED.append((cast, dot))
    return True
