"""The correctness gate's statistics in one pass over an output and its reference: a small trusted Triton kernel,
instead of a dozen torch passes with float64 temporaries (docs/measurements.md).

Each program reads its span of both tensors once and writes a row of partial statistics (``STATS``); torch reduces
the rows and reads the totals back in one transfer. The first offending element is looked for afterwards, and only
when an element is out of tolerance, in the span of the first program that counted one (``first_bad_span``).

Same verdict as the torch path (``fitness.comparison.correctness._chunk_errors``), element for element: both widen the
two values exactly to float64 and compute ``|out - ref| > atol + rtol * |ref|`` with the same IEEE-754 double
operations on the same operands, in the same order -- atol and rtol are read from a float64 tensor (a Python float
argument would reach the kernel as float32), and floating-point contraction is off (``enable_fp_fusion=False``: no
fused multiply-add, which would round ``rtol * |ref| + atol`` once instead of twice). The counts and the largest
absolute error are therefore the torch path's exactly, and so is the largest relative error: rounding is monotone,
so the largest of the rounded quotients is the rounded quotient of the largest exact ratio, which the kernel finds
by exact comparisons of products (``_ratio_above``) and divides once per lane (a float64 division is a long
instruction sequence on a GPU). The sums of squares (rel_l2) differ only in the order they are summed. The pass
reads both tensors once (its speed: docs/measurements.md).

The kernel compares CUDA tensors of float16, bfloat16, float32 and float64, and under Triton's interpreter
(TRITON_INTERPRET=1), when asked to (``interpreter=True``: the tests), CPU tensors -- by default the CPU keeps the
torch path, some hundred times faster there than the interpreter; elsewhere ``fused_stats`` returns None and the
caller takes the torch path. It returns None too when the rows do not account for every element (each row counts the
elements its program saw, and the rows start as NaN): a launch that never happened (a patched launcher, the launch
counter's compile-only mode) cannot pass for a clean comparison. Its variants differ only in dtype (the element
count is not specialised, and an output that is not 16-byte aligned is copied first), so those of the usual dtypes
are compiled by every spare before its job (``compile_ahead``), before any candidate code exists.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is a dependency; without it every comparison takes the torch path
    triton = None

# a row per program: flags (1.0 where any element of its span is so), maxima, sums and counts
STATS = ("out_nonfinite", "ref_nonfinite", "max_abs", "max_rel", "ref_sq", "diff_sq", "bad", "nonfinite_mismatch",
         "seen")
_MAXIMA = [STATS.index("max_abs"), STATS.index("max_rel")]
_SUMS = [i for i in range(len(STATS)) if i not in _MAXIMA]
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
BLOCK = 256  # elements a program reads per step
NUM_WARPS = 4  # two elements a thread: few registers, so many warps in flight (the fastest tried)
MAX_PROGRAMS = 8192  # programs per comparison at most: more elements make each program's span longer
ALIGN = 16  # bytes: Triton specialises pointers on it, so an unaligned output would compile another variant


if triton is not None:
    @triton.jit
    def _as_float64(x, KIND: tl.constexpr):
        """Exactly the value of `x` as float64; a bfloat16 comes as its bits (int16): the upper half of the float32
        of the same value (shifted in, not converted: the interpreter's own conversion flushes subnormals)."""
        if KIND == 2:
            return ((x.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True).to(tl.float64)
        elif KIND == 1:
            return x.to(tl.float64)
        else:  # float16 / float32 -> float32 -> float64
            return x.to(tl.float32).to(tl.float64)

    @triton.jit
    def _ratio_above(d, e, best_d, best_e):
        """Whether d / e > best_d / best_e, decided exactly without dividing (all non-negative, e > 0): the two
        products d * best_e and best_d * e, each exactly a rounded product plus its rounding error (an fma), are
        compared. Exact while no product leaves float64's normal range: operands widened from 32 bits or fewer."""
        p = d * best_e
        q = best_d * e
        return (p > q) | ((p == q) & (tl.fma(d, best_e, -p) > tl.fma(best_d, e, -q)))

    @triton.jit(do_not_specialize=["n", "span"])
    def _compare_kernel(out_ptr, ref_ptr, tol_ptr, rows_ptr, n, span, NSTATS: tl.constexpr, BLOCK: tl.constexpr,
                        KIND: tl.constexpr):
        pid = tl.program_id(0)
        start = pid.to(tl.int64) * span
        atol = tl.load(tol_ptr)
        rtol = tl.load(tol_ptr + 1)
        floor = tl.load(tol_ptr + 2)  # max(atol, 1e-30): the relative error's denominator at least
        offs = tl.arange(0, BLOCK)
        flags = tl.zeros([BLOCK], dtype=tl.int32)  # bits: out non-finite, ref non-finite, non-finite mismatch
        bad = tl.zeros([BLOCK], dtype=tl.int32)
        seen = tl.zeros([BLOCK], dtype=tl.int32)
        max_abs = tl.zeros([BLOCK], dtype=tl.float64)
        best_d = tl.zeros([BLOCK], dtype=tl.float64)  # the largest relative error so far is best_d / best_e
        best_e = tl.full([BLOCK], 1.0, dtype=tl.float64)
        ref_sq = tl.zeros([BLOCK], dtype=tl.float64)
        diff_sq = tl.zeros([BLOCK], dtype=tl.float64)
        for step in range(0, span, BLOCK):
            idx = start + step + offs
            mask = idx < n
            o = _as_float64(tl.load(out_ptr + idx, mask=mask, other=0), KIND)
            r = _as_float64(tl.load(ref_ptr + idx, mask=mask, other=0), KIND)
            o_finite = tl.abs(o) < float("inf")  # False for NaN too
            r_finite = tl.abs(r) < float("inf")
            same = ((o != o) & (r != r)) | ((o == r) & ~r_finite)  # NaN and NaN, or the same infinity
            mismatch = (~o_finite | ~r_finite) & ~same
            flags = flags | (~o_finite).to(tl.int32) | ((~r_finite).to(tl.int32) << 1) | (mismatch.to(tl.int32) << 2)
            diff = tl.where(r_finite, tl.abs(o - r), 0.0)
            scale = tl.where(r_finite, tl.abs(r), 0.0)
            bad += ((diff > atol + rtol * scale) & mask).to(tl.int32)
            max_abs = tl.maximum(max_abs, diff)
            den = tl.maximum(scale, floor)
            if KIND == 1:  # float64 values: products could leave the normal range, so divide (slowly)
                larger = diff / den > best_d / best_e
            else:
                larger = _ratio_above(diff, den, best_d, best_e)
            best_d = tl.where(larger, diff, best_d)
            best_e = tl.where(larger, den, best_e)
            finite_ref = tl.where(r_finite, r, 0.0)
            ref_sq += finite_ref * finite_ref
            diff_sq += diff * diff
            seen += mask.to(tl.int32)
        row = rows_ptr + pid.to(tl.int64) * NSTATS  # the order of STATS
        tl.store(row, tl.max(flags & 1, axis=0).to(tl.float64))
        tl.store(row + 1, tl.max((flags >> 1) & 1, axis=0).to(tl.float64))
        tl.store(row + 2, tl.max(max_abs, axis=0))
        tl.store(row + 3, tl.max(best_d / best_e, axis=0))  # the division of the largest ratio: the torch path's
        tl.store(row + 4, tl.sum(ref_sq, axis=0))
        tl.store(row + 5, tl.sum(diff_sq, axis=0))
        tl.store(row + 6, tl.sum(bad, axis=0).to(tl.float64))
        tl.store(row + 7, tl.max((flags >> 2) & 1, axis=0).to(tl.float64))
        tl.store(row + 8, tl.sum(seen, axis=0).to(tl.float64))


def _interpreted() -> bool:
    if triton is None:
        return False
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every supported triton has it
        return False
    return isinstance(_compare_kernel, InterpretedFunction)


INTERPRETED = _interpreted()  # decided when the kernel was defined (TRITON_INTERPRET at import)


def can_run(out: torch.Tensor, ref: torch.Tensor, interpreter: bool = False) -> bool:
    """Whether the kernel compares these: a dtype it reads, both on one CUDA device (the kernel compiled), or with
    `interpreter`, both on the CPU under Triton's interpreter."""
    if triton is None or out.device != ref.device or ref.dtype not in DTYPES or out.dtype != ref.dtype:
        return False
    if INTERPRETED:
        return interpreter and ref.device.type == "cpu"
    return ref.device.type == "cuda"


@dataclass
class FusedStats:
    values: dict  # STATS name -> float, over the whole tensor
    rows: torch.Tensor  # one row of partial statistics per program, on the device
    span: int  # elements per program

    def first_bad_span(self, count: int) -> tuple[int, int]:
        """[start, end) of the first program's span with an element out of tolerance (a read, on failure only)."""
        program = int(torch.nonzero(self.rows[:, STATS.index("bad")])[0][0])
        return program * self.span, min(count, (program + 1) * self.span)


def _flat_aligned(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    if not flat.is_contiguous() or flat.data_ptr() % ALIGN:
        flat = flat.clone(memory_format=torch.contiguous_format)
    return flat


def _launch(flat_out, flat_ref, tols, rows, count: int, span: int, warmup: bool = False):
    """The kernel over (flat, aligned) tensors of one dtype, or with `warmup` only compiled: one home for the
    arguments, so that a variant compiled ahead (`compile_ahead`) is the one a comparison launches."""
    kind = {torch.bfloat16: 2, torch.float64: 1}.get(flat_ref.dtype, 0)
    if kind == 2:  # read as bits (_as_float64)
        flat_out, flat_ref = flat_out.view(torch.int16), flat_ref.view(torch.int16)
    args = (flat_out, flat_ref, tols, rows, count, span)
    options = {"NSTATS": len(STATS), "BLOCK": BLOCK, "KIND": kind, "num_warps": NUM_WARPS, "enable_fp_fusion": False}
    grid = (rows.shape[0],)
    if warmup:
        return _compare_kernel.warmup(*args, grid=grid, **options)
    return _compare_kernel[grid](*args, **options)


def compile_ahead(device: str, dtypes) -> None:
    """Compile and load the kernel for `dtypes` without launching it (no GPU work but small allocations): a spare
    does this before its job, outside the GPU's lock (``fitness.workers.warm.prewarm_triton``), so that no comparison
    compiles while the lock is held or once candidate code exists."""
    for dtype in dtypes:
        x = torch.empty(BLOCK, dtype=dtype, device=device)
        tols = torch.empty(3, dtype=torch.float64, device=device)
        rows = torch.empty((1, len(STATS)), dtype=torch.float64, device=device)
        kernel = _launch(x, x, tols, rows, BLOCK, BLOCK, warmup=True)
        if callable(getattr(kernel, "_init_handles", None)):
            kernel._init_handles()  # loads the module and builds the launcher


def fused_stats(out: torch.Tensor, ref: torch.Tensor, tol, interpreter: bool = False) -> FusedStats | None:
    """`STATS` of `out` against `ref` (same shape, checked by the caller) under Tolerance `tol`, in one pass; None
    where the kernel does not run (`can_run`) or its rows do not account for every element (then the caller compares
    in torch)."""
    count = ref.numel()
    if not count or not can_run(out, ref, interpreter):
        return None
    flat_out, flat_ref = _flat_aligned(out), _flat_aligned(ref)
    span = triton.cdiv(triton.cdiv(count, BLOCK), MAX_PROGRAMS) * BLOCK
    rows = torch.full((triton.cdiv(count, span), len(STATS)), float("nan"), dtype=torch.float64, device=ref.device)
    tols = torch.tensor([tol.atol, tol.rtol, max(tol.atol, 1e-30)], dtype=torch.float64).to(ref.device)
    _launch(flat_out, flat_ref, tols, rows, count, span)
    totals = torch.cat([rows[:, _SUMS].sum(0), rows[:, _MAXIMA].amax(0)]).tolist()  # the one read back
    values = dict(zip([STATS[i] for i in _SUMS + _MAXIMA], totals))
    if values["seen"] != count:
        return None
    return FusedStats(values, rows, span)
