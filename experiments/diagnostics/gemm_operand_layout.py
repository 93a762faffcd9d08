"""Does the layout of B decide the fp32/TF32 GEMM gap (issue: compiler seeds)? Inductor's Triton GEMM runs
level1/1_Square_matrix_multiplication_ (`A @ B`, both row-major fp32, TF32 allowed) at 0.23x cuBLAS on an H200
(`gemm_gap_h200.json`), while the `nn.Linear` GEMMs of level 2 (`x @ W.T`) reach 0.87-0.96x. In `A @ B` with B
row-major, B's tile is contiguous along N; in `x @ W.T` it is contiguous along K. Hopper's TF32 tensor-core
instruction (wgmma) reads both operands K-major from shared memory, so the suspicion is that Triton cannot use it
for an N-major fp32 B and falls back to the older, slower path.

    python3 experiments/diagnostics/gemm_operand_layout.py --out OUT.json [--size 4096]

The same plain Triton matmul (one kernel, grouped tile order, `tl.dot` with TF32) is timed with B as given
(N-major) and with B stored transposed (K-major, the same values), over a few tile configurations, next to
`torch.mm` (cuBLAS, TF32) and the cost of making the K-major copy (a transpose, timed on its own). Timed with
`triton.testing.do_bench` (median). A GPU script: nothing here runs in the tests.
"""
from __future__ import annotations

import argparse
import json

import torch
import triton
import triton.language as tl

CONFIGS = [  # BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages
    (128, 128, 32, 8, 4, 4),
    (128, 256, 32, 8, 8, 3),
    (256, 128, 32, 8, 8, 3),
    (128, 128, 64, 8, 8, 3),
    (64, 256, 32, 8, 4, 4),
]


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    group = GROUP_M * grid_n
    first_m = (pid // group) * GROUP_M
    size_m = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        acc = tl.dot(tl.load(a, mask=rk[None, :] < left, other=0.0), tl.load(b, mask=rk[:, None] < left, other=0.0),
                     acc, input_precision="tf32")
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, config) -> torch.Tensor:
    bm, bn, bk, gm, warps, stages = config
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty(m, n, device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                        c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps,
                        num_stages=stages)
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    from triton.testing import do_bench

    torch.backends.cuda.matmul.allow_tf32 = True
    size = args.size
    a, b = (torch.randn(size, size, device="cuda") for _ in range(2))
    b_kmajor = b.t().contiguous().t()  # the same matrix, stored column-major: contiguous along K
    flops = 2 * size ** 3
    reference = torch.mm(a, b)
    cublas_ms = do_bench(lambda: torch.mm(a, b))
    rows = [{"variant": "cublas", "ms": cublas_ms, "tflops": flops / cublas_ms / 1e9}]
    rows.append({"variant": "transpose_copy", "ms": do_bench(lambda: b.t().contiguous())})
    for layout, operand in (("b_n_major", b), ("b_k_major", b_kmajor)):
        for config in CONFIGS:
            row = {"variant": layout, "config": list(config)}
            try:
                out = matmul(a, operand, config)
                row["max_rel_err"] = float(((out - reference).abs().max() / reference.abs().max()).item())
                row["ms"] = do_bench(lambda: matmul(a, operand, config))
                row["tflops"] = flops / row["ms"] / 1e9
                row["vs_cublas"] = cublas_ms / row["ms"]
            except Exception as exc:  # noqa: BLE001 - a configuration that does not fit is a row, not a crash
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "size": size}
    with open(args.out, "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
