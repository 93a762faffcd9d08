"""Data for the normwise bound of the precision policies (issue: hardening): the relative L2 error
||out - ref|| / ||ref|| that honest reduced-precision kernels reach, against what known cheats produce, each
against an fp64 reference. CPU only, deterministic (seed 0); reduced precision is emulated where the CPU has none
(TF32: inputs rounded to 10 mantissa bits, products summed in fp32).

    python3 experiments/diagnostics/tolerance_data.py > experiments/results/tolerance_data/tolerance_data.md
"""
from __future__ import annotations

import math

import torch


def rel_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Round fp32 to TF32 (10 explicit mantissa bits), to nearest."""
    bits = x.float().contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF
    return rounded.view(torch.float32)


def honest(gen: torch.Generator) -> list[tuple[str, float]]:
    rows = []
    for m, k, n in ((256, 1024, 256), (256, 4096, 256)):
        a, b = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
        ref = a.double() @ b.double()
        rows.append((f"GEMM {m}x{k}x{n}, fp32", rel_l2(a @ b, ref)))
        rows.append((f"GEMM {m}x{k}x{n}, TF32 inputs, fp32 accumulation", rel_l2(tf32(a) @ tf32(b), ref)))
        rows.append((f"GEMM {m}x{k}x{n}, fp16 inputs, fp32 accumulation", rel_l2(a.half().float() @ b.half().float(), ref)))
        rows.append((f"GEMM {m}x{k}x{n}, bf16 inputs, fp32 accumulation", rel_l2(a.bfloat16().float() @ b.bfloat16().float(), ref)))
        chunks = [(a[:, i:i + 64].half().float() @ b[i:i + 64].half().float()).half() for i in range(0, k, 64)]
        acc = torch.zeros(m, n, dtype=torch.float16)
        for c in chunks:
            acc = (acc.float() + c.float()).half()  # fp16 accumulation of fp16 partial sums
        rows.append((f"GEMM {m}x{k}x{n}, fp16 inputs, fp16 accumulation per 64-wide block", rel_l2(acc, ref)))
    x = torch.rand(512, 4096, generator=gen)
    ref = torch.softmax(x.double(), dim=1)
    m = torch.full((512, 1), -math.inf)
    s = torch.zeros(512, 1)
    for i in range(0, 4096, 256):  # online softmax over 256-wide blocks, fp32
        blk = x[:, i:i + 256]
        new_m = torch.maximum(m, blk.max(dim=1, keepdim=True).values)
        s = s * torch.exp(m - new_m) + torch.exp(blk - new_m).sum(dim=1, keepdim=True)
        m = new_m
    rows.append(("softmax 512x4096, online over 256-wide blocks, fp32", rel_l2(torch.exp(x - m) / s, ref)))
    rows.append(("softmax 512x4096, fp16 output", rel_l2(torch.softmax(x, 1).half(), ref)))
    rows.append(("softmax 512x4096, bf16 output", rel_l2(torch.softmax(x, 1).bfloat16(), ref)))
    y = torch.randn(512, 4096, generator=gen)
    ln_ref = torch.nn.functional.layer_norm(y.double(), (4096,))
    rows.append(("layernorm 512x4096, fp32 (one-pass variance)", rel_l2(
        (y - y.mean(1, keepdim=True)) / torch.sqrt((y * y).mean(1, keepdim=True) - y.mean(1, keepdim=True) ** 2
                                                   + 1e-5), ln_ref)))
    rows.append(("GELU 512x4096, tanh approximation for erf", rel_l2(
        torch.nn.functional.gelu(y, approximate="tanh"), torch.nn.functional.gelu(y.double()))))
    return rows


def cheats(gen: torch.Generator) -> list[tuple[str, float]]:
    rows = []
    for n in (1024, 4096, 16384):
        x = torch.rand(256, n, generator=gen)  # KernelBench's inputs: torch.rand
        ref = torch.softmax(x.double(), dim=1)
        rows.append((f"softmax 256x{n} of rand without max and sum: exp(x) / (n sqrt(e))",
                     rel_l2(torch.exp(x) / (n * math.sqrt(math.e)), ref)))
    for n in (1024, 16384, 393216):  # normal inputs: the guess sqrt(e) = E[exp(x)] is unbiased, its noise ~ n^-1/2
        x = torch.randn(16, n, generator=gen)
        rows.append((f"softmax 16x{n} of randn without max and sum: exp(x) / (n sqrt(e))",
                     rel_l2(torch.exp(x) / (n * math.sqrt(math.e)), torch.softmax(x.double(), dim=1))))
    x = torch.rand(256, 4096, generator=gen)
    rows.append(("softmax 256x4096 as the uniform 1/n", rel_l2(torch.full_like(x, 1 / 4096), torch.softmax(x.double(), 1))))
    a, b = torch.randn(256, 1024, generator=gen), torch.randn(1024, 256, generator=gen)
    ref = a.double() @ b.double()
    rows.append(("GEMM 256x1024x256 over half of K (skipped work)", rel_l2(2 * a[:, :512] @ b[:512], ref)))
    rows.append(("GEMM 256x1024x256, fp8-like inputs (3 mantissa bits)", rel_l2(
        (a.float().view(torch.int32) & ~0xFFFFF).view(torch.float32) @ (b.view(torch.int32) & ~0xFFFFF).view(torch.float32), ref)))
    return rows


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    print("| kind | case | relative L2 error |\n|---|---|---|")
    for kind, rows in (("honest", honest(gen)), ("cheat", cheats(gen))):
        for name, value in rows:
            print(f"| {kind} | {name} | {value:.2e} |")


if __name__ == "__main__":
    main()
