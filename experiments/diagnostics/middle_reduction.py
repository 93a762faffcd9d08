"""level1/47 and 48 (sum and mean over the middle dimension of 128 x 4096 x 4095) are 0.93x and 0.88x of eager's
reduction (`experiments/results/kernelbench_merged/`): is that the 15 s search's few evaluations, or the kernel's
form? Times, on a GPU, Inductor's form of the reduction (one program per tile of XBLOCK output columns, looping
over the reduced dimension RBLOCK rows at a time) over a grid of launch parameters, and a
second form that splits the reduced dimension over SPLIT programs (partial sums, then their sum), against
torch.sum. Every output is checked against torch's first. Median of triton.testing.do_bench, in ms::

    python3 experiments/diagnostics/middle_reduction.py --out $OUT/middle_reduction.json      # a minute or two
    TRITON_INTERPRET=1 python3 experiments/diagnostics/middle_reduction.py --shape 2,40,7 --quick   # a smoke check
"""
from __future__ import annotations

import argparse
import itertools
import json

import torch
import triton
import triton.language as tl
import triton.testing


@triton.jit
def reduce_rows(x_ptr, out_ptr, R, N, r_per_split, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    """out[split, b, n] = sum over r in split's rows of x[b, r, n] (one split: Inductor's form)."""
    cols = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    b, split = tl.program_id(1), tl.program_id(2)
    acc = tl.zeros([RBLOCK, XBLOCK], dtype=tl.float32)
    start = split * r_per_split
    for r0 in range(start, start + r_per_split, RBLOCK):
        rows = r0 + tl.arange(0, RBLOCK)
        mask = (rows[:, None] < tl.minimum(start + r_per_split, R)) & (cols[None, :] < N)
        acc += tl.load(x_ptr + b.to(tl.int64) * R * N + rows[:, None].to(tl.int64) * N + cols[None, :], mask=mask,
                       other=0.0)
    tl.store(out_ptr + (split * tl.num_programs(1) + b).to(tl.int64) * N + cols, tl.sum(acc, 0), mask=cols < N)


def run(x: torch.Tensor, xblock: int, rblock: int, warps: int, split: int) -> torch.Tensor:
    batch, rows, cols = x.shape
    per_split = triton.cdiv(triton.cdiv(rows, split), rblock) * rblock
    partial = torch.empty(split, batch, cols, device=x.device, dtype=torch.float32)
    reduce_rows[(triton.cdiv(cols, xblock), batch, split)](x, partial, rows, cols, per_split, XBLOCK=xblock,
                                                          RBLOCK=rblock, num_warps=warps)
    return partial[0] if split == 1 else partial.sum(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="128,4096,4095")
    parser.add_argument("--out")
    parser.add_argument("--quick", action="store_true", help="a few settings only (the interpreter)")
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.rand(*map(int, args.shape.split(",")), device=device)
    expected = torch.sum(x, dim=1)
    grid = ([(64, 4, 4, 1), (64, 4, 4, 2)] if args.quick else
            itertools.product((64, 128, 256, 512), (2, 8, 32), (4, 8), (1, 4)))  # 48 settings, about 2 minutes
    bench = (lambda f: float("nan")) if device == "cpu" else \
        (lambda f: triton.testing.do_bench(f, return_mode="median"))
    rows = [{"form": "torch.sum (eager)", "ms": bench(lambda: torch.sum(x, dim=1))}]
    for xblock, rblock, warps, split in grid:
        if xblock * rblock > 65536 or xblock * rblock < 32 * warps:
            continue
        try:
            got = run(x, xblock, rblock, warps, split)
        except Exception as exc:  # out of resources: said, and the sweep goes on
            rows.append({"xblock": xblock, "rblock": rblock, "warps": warps, "split": split,
                         "error": f"{type(exc).__name__}: {str(exc)[:120]}"})
            continue
        ok = torch.allclose(got, expected, rtol=1e-4, atol=1e-2)
        rows.append({"xblock": xblock, "rblock": rblock, "warps": warps, "split": split, "correct": ok,
                     "ms": bench(lambda: run(x, xblock, rblock, warps, split)) if ok else None})
    timed = sorted((r for r in rows if r.get("ms") == r.get("ms") and r.get("ms") is not None and "form" not in r),
                   key=lambda r: r["ms"])
    print(f"{rows[0]['form']}: {rows[0]['ms']:.3f} ms on {device}, shape {tuple(x.shape)}")
    for r in timed[:12]:
        print(f"  XBLOCK={r['xblock']} RBLOCK={r['rblock']} warps={r['warps']} split={r['split']}: {r['ms']:.3f} ms")
    print(f"{sum(1 for r in rows if r.get('correct'))} settings correct, {sum(1 for r in rows if 'error' in r)} failed")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"shape": list(x.shape), "device": torch.cuda.get_device_name() if device == "cuda" else device,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
