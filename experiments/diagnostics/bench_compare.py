"""The correctness gate's output comparison at KernelBench sizes (issue: search at KernelBench scale): today's torch
path (``fitness.comparison.correctness``: float64 chunks, a dozen passes, each with its temporaries) against the
one-pass kernel (``fitness.comparison.fused_compare``), on outputs that pass, with the reference's forward and a trial's
input check (``changed_inputs``) beside them for scale: what one correctness trial costs besides the candidate.

Each case makes the problem's inputs, runs its reference (the KernelBench ``Model.forward``'s torch ops), perturbs
the output within the policy's tolerance and compares it both ways. Times are medians of --reps calls after one
warm-up (which also compiles the kernel), from CUDA events; "extra GiB" is the peak memory a call allocates beyond
its inputs. "agree" says whether both paths gave the same verdict and statistics. A case that runs out of memory
is reported as such and the rest go on.

    python3 experiments/diagnostics/bench_compare.py --out experiments/results/compare_h100/compare_h100.json   # a GPU;
    < 2 minutes python3 experiments/diagnostics/bench_compare.py --quick --out /tmp/compare_cpu.json   # tiny sizes; on
    the CPU the kernel
                                                                               # runs in Triton's interpreter

Writes the rows as JSON (--out) and the Markdown table beside it (.md), and prints both.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# name, what KernelBench problem it stands for, dtype, full and --quick sizes, reference forward
CASES = [
    ("log_softmax", "level1/24_LogSoftmax: 4096 x 393216", "float32", {"x": (4096, 393216)}, {"x": (16, 384)}),
    ("conv3d", "level1/54_conv_standard_3D: 16x3x64^3 -> 16x64x62^3", "float32",
     {"x": (16, 3, 64, 64, 64), "w": (64, 3, 3, 3, 3)}, {"x": (2, 3, 8, 8, 8), "w": (4, 3, 3, 3, 3)}),
    ("conv2d", "a level2 conv output: 128x3x256^2 -> 128x64x254^2", "float32",
     {"x": (128, 3, 256, 256), "w": (64, 3, 3, 3)}, {"x": (2, 3, 16, 16), "w": (4, 3, 3, 3)}),
    ("gelu_bf16", "level1/26_GELU in bf16: 4096 x 393216", "bfloat16", {"x": (4096, 393216)}, {"x": (16, 384)}),
    ("matmul_bf16", "level1/1_Square_matrix_multiplication in bf16: 8192^2", "bfloat16",
     {"a": (8192, 8192), "b": (8192, 8192)}, {"a": (64, 64), "b": (64, 64)}),
    ("softmax_small", "a small output: 128 x 4096", "float32", {"x": (128, 4096)}, {"x": (16, 256)}),
]


def forward(name: str, t: dict):
    import torch
    import torch.nn.functional as F

    if name == "log_softmax":
        return torch.log_softmax(t["x"], dim=1)
    if name == "conv3d":
        return F.conv3d(t["x"], t["w"])
    if name == "conv2d":
        return F.conv2d(t["x"], t["w"])
    if name == "gelu_bf16":
        return F.gelu(t["x"])
    if name == "matmul_bf16":
        return t["a"] @ t["b"]
    return torch.softmax(t["x"], dim=1)


class Clock:
    """Milliseconds of a call: CUDA events on a GPU, the wall clock on the CPU."""

    def __init__(self, device: str):
        import torch

        self.torch, self.cuda = torch, device.startswith("cuda")

    def time_ms(self, fn, reps: int) -> tuple:
        """(median ms over `reps` calls after one warm-up, the last result, peak GiB allocated beyond the start)."""
        torch = self.torch
        result = fn()
        times = []
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        for _ in range(reps):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                result = fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                began = time.perf_counter()
                result = fn()
                times.append((time.perf_counter() - began) * 1e3)
        extra = (torch.cuda.max_memory_allocated() - base) / 2 ** 30 if self.cuda else float("nan")
        return statistics.median(times), result, extra


def run_case(case, device: str, quick: bool, reps: int, policy) -> dict:
    import torch

    from fitness.comparison import correctness
    from fitness.judge.inputs import clone_all

    name, stands_for, dtype_name, full, small = case
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator(device=device).manual_seed(0)
    tensors = {k: torch.rand(shape, generator=gen, device=device).to(dtype) for k, shape in (small if quick
                                                                                             else full).items()}
    clock = Clock(device)
    row = {"case": name, "stands_for": stands_for, "dtype": dtype_name}
    with torch.no_grad():
        row["forward_ms"], ref, _ = clock.time_ms(lambda: forward(name, tensors), reps)
        row["output_shape"], row["output_gib"] = list(ref.shape), ref.numel() * ref.element_size() / 2 ** 30
        tol = policy.tolerance_for(ref.dtype)
        out = ref * (1 + tol.rtol / 4)  # within every element's tolerance
        fused_flag = True if device == "cpu" else None  # the CPU runs the kernel only in the interpreter, if asked
        row["torch_ms"], plain, row["torch_extra_gib"] = clock.time_ms(
            lambda: correctness.compare_tensor(out, ref, tol, fused=False), reps)
        row["fused_ms"], fused, row["fused_extra_gib"] = clock.time_ms(
            lambda: correctness.compare_tensor(out, ref, tol, fused=fused_flag), reps)
        row["agree"] = (plain.ok, plain.reason, plain.max_abs_err, plain.max_rel_err) == (
            fused.ok, fused.reason, fused.max_abs_err, fused.max_rel_err) and abs(
            plain.rel_l2 - fused.rel_l2) <= 1e-9 * abs(plain.rel_l2)
        row["ok"], row["max_abs_err"], row["rel_l2"] = fused.ok, fused.max_abs_err, fused.rel_l2
        del out, ref, plain, fused
        inputs = list(tensors.values())
        saved = clone_all(inputs)
        row["input_check_ms"], changed, _ = clock.time_ms(lambda: correctness.changed_inputs(inputs, saved), reps)
        assert changed == [], changed
    row["speedup"] = row["torch_ms"] / row["fused_ms"]
    return row


def markdown(rows: list, device: str) -> str:
    lines = [f"Output comparison at KernelBench sizes on {device} (medians, ms)", "",
             "| case | output | GiB | reference forward | input check | compare: torch | compare: fused | speed-up | "
             "extra GiB torch / fused | agree |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['stands_for']} | | | | | | | | {r['error']} |")
            continue
        extra = "-" if math.isnan(r["torch_extra_gib"]) else f"{r['torch_extra_gib']:.2f} / {r['fused_extra_gib']:.2f}"
        lines.append(f"| {r['case']} | {r['stands_for']} ({r['dtype']}) | {r['output_gib']:.2f} | "
                     f"{r['forward_ms']:.2f} | {r['input_check_ms']:.2f} | {r['torch_ms']:.2f} | {r['fused_ms']:.2f} | "
                     f"{r['speedup']:.3g}x | {extra} | {r['agree']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="JSON file of the rows; the Markdown table goes beside it (.md)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a check of the script, e.g. on the CPU)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=[c[0] for c in CASES], help="a subset of the cases, by name")
    parser.add_argument("--policy", default="triton", help="precision policy whose tolerances judge the outputs")
    args = parser.parse_args()
    unknown = set(args.cases) - {c[0] for c in CASES}
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {[c[0] for c in CASES]}")
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        if not args.quick:
            parser.error("no GPU here: the full sizes need one; use --quick for a check on the CPU")
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported (by fitness.comparison.correctness)
    from fitness.comparison.policy import load_policy

    policy = load_policy(args.policy)
    name = torch.cuda.get_device_name() if device == "cuda" else "cpu (Triton interpreter)"
    print(f"[bench_compare] {name}, torch {torch.__version__}, policy {args.policy}", flush=True)
    rows = []
    for case in CASES:
        if case[0] not in args.cases:
            continue
        began = time.perf_counter()
        try:
            row = run_case(case, device, args.quick, args.reps, policy)
        except torch.cuda.OutOfMemoryError as exc:
            row = {"case": case[0], "stands_for": case[1], "error": f"out of memory: {str(exc)[:120]}"}
        except RuntimeError as exc:  # an older torch raises a plain RuntimeError on OOM
            if "out of memory" not in str(exc):
                raise
            row = {"case": case[0], "stands_for": case[1], "error": f"out of memory: {str(exc)[:120]}"}
        if device == "cuda":
            torch.cuda.empty_cache()
        row["wall_s"] = time.perf_counter() - began
        rows.append(row)
        print(f"[bench_compare] {json.dumps(row)}", flush=True)
    table = markdown(rows, name)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": name, "torch": torch.__version__, "policy": args.policy,
                               "quick": args.quick, "rows": rows}, indent=1))
    out.with_suffix(".md").write_text(table)
    print(table, flush=True)


if __name__ == "__main__":
    main()
