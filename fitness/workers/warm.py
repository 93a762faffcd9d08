"""What a spare worker does before its job arrives (trusted code only; no candidate exists yet), so the job's own
stages start warm:

* ``prewarm_triton``: load Triton's driver (its stubs from the cache, or built now) and compile a tiny kernel
  and the judge's comparison kernel (``fitness.comparison.fused_compare``, for each dtype of WARM_DTYPES) without
  launching them, outside the GPU's lock;
* ``warm_judge``: run the judge's own GPU work once on small tensors -- random inputs, copies, the output
  comparison, CUDA events -- under the GPU's *shared* lock unless ``fitness.start_up_under_lock`` resolves to
  false (by the hardware profile: then during timings, like the worker's CUDA context). A fresh
  process pays for each torch kernel's first use (its module is loaded lazily) and for its first allocations; paid
  here, in the spare's idle time, they are meant not to lengthen the correctness trials, which hold the shared
  lock and so keep a waiting timer off the GPU. Its effect on throughput has not been isolated yet
  (``experiments/results/throughput/throughput_h100.md``); ``fitness.warm_judge=false`` turns it off for that
  comparison.

Both are best effort: a failure is reported and the job runs cold.
"""
from __future__ import annotations

import os
import sys

import torch

from fitness.comparison import fused_compare
from fitness.comparison.correctness import compare_tensor, same_bits
from fitness.comparison.policy import Tolerance

WARM_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def prewarm_triton(device: str) -> str:
    """Load Triton's driver and compile, without launching, a tiny kernel and the comparison kernel; "ok", "skipped"
    or why it failed."""
    if not device.startswith("cuda") or os.environ.get("TRITON_INTERPRET") == "1":
        return "skipped"
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _prewarm(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        kernel = _prewarm.warmup(torch.float32, 1, BLOCK=128, grid=(1,))
        if callable(getattr(kernel, "_init_handles", None)):
            kernel._init_handles()  # loads the module and builds the launcher (a per-signature .so before 3.5)
    except Exception as exc:  # pragma: no cover - depends on the Triton version
        print(f"[worker] Triton pre-warm skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return f"failed: {type(exc).__name__}: {exc}"
    try:
        fused_compare.compile_ahead(device, WARM_DTYPES)  # the judge's comparison kernel, also launching nothing
    except Exception as exc:  # pragma: no cover - best effort: the first comparison compiles it then
        print(f"[worker] comparison kernel not compiled ahead: {type(exc).__name__}: {exc}", file=sys.stderr)
    return "ok"


def judge_warm_up(device: str) -> None:
    """The judge's kernels once each, on small tensors of every float dtype the problems use."""
    for dtype in WARM_DTYPES:
        out = torch.randn(4096, device=device, dtype=dtype)
        ref = out.clone()
        ref.copy_(out)
        torch.rand(64, device=device, dtype=dtype)
        same_bits(out, ref)
        compare_tensor(out, ref, Tolerance(atol=1e-5, rtol=1e-5, max_rel_l2=1e-2))
        bad = out.clone()
        bad[7] = float("nan")
        compare_tensor(bad, ref, Tolerance(atol=1e-5, rtol=1e-5))  # the failure path: nonzero, isnan, item
        bad.fill_(float("nan"))
    torch.randint(0, 10, (64,), device=device)
    torch.empty(1 << 20, dtype=torch.int32, device=device).zero_()  # the timer's L2 flush
    if device.startswith("cuda"):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        torch.cuda.synchronize()
        start.elapsed_time(end)


def warm_judge(device: str) -> str:
    """`judge_warm_up`; the caller holds the GPU's shared lock unless fitness.start_up_under_lock is false."""
    if not device.startswith("cuda"):
        return "skipped"
    try:
        judge_warm_up(device)
        torch.cuda.synchronize()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - best effort; the job then runs cold
        print(f"[worker] judge warm-up skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        return f"failed: {type(exc).__name__}: {exc}"
