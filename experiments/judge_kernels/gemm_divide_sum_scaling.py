"""Exact rewrite of KernelBench level2/14_Gemm_Divide_Sum_Scaling: sum_h (x W^T)[b, h] / 2 * s = (s / 2) x[b] .
colsum(W), so no GEMM (137 GFLOP at full size): W's column sums in two deterministic stages (partial sums over
row splits, then their sum), then each row's dot product with them. The same result up to fp32 reassociation."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_K = 128
SPLIT = 16
BLOCK_H = 32
TUNABLE = {"BLOCK_K": [64, 128, 256], "SPLIT": [8, 16, 32], "BLOCK_H": [16, 32, 64]}


@triton.jit
def colsum_partial_kernel(w_ptr, part_ptr, H, K, rows_per_split, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    split = tl.program_id(1)
    start = split * rows_per_split
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for offset in range(0, rows_per_split, BLOCK_H):
        rows = start + offset + tl.arange(0, BLOCK_H)
        mask = (rows[:, None] < H) & (rows[:, None] < start + rows_per_split) & (cols[None, :] < K)
        acc += tl.sum(tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(part_ptr + split * K + cols, acc, mask=cols < K)


@triton.jit
def colsum_reduce_kernel(part_ptr, out_ptr, K, SPLIT: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    parts = tl.arange(0, SPLIT)
    mask = (parts[:, None] < SPLIT) & (cols[None, :] < K)
    total = tl.sum(tl.load(part_ptr + parts[:, None] * K + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, total, mask=cols < K)


@triton.jit
def row_dot_kernel(x_ptr, c_ptr, out_ptr, K, scale, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        mask = cols < K
        acc += tl.load(x_ptr + row * K + cols, mask=mask, other=0.0) * tl.load(c_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x, w = x.contiguous(), self.weight.contiguous()
        (B, K), H = x.shape, w.shape[0]
        rows_per_split = triton.cdiv(H, SPLIT)
        part = torch.empty((SPLIT, K), device=x.device, dtype=torch.float32)
        colsum_partial_kernel[(triton.cdiv(K, BLOCK_K), SPLIT)](w, part, H, K, rows_per_split, BLOCK_H=BLOCK_H,
                                                                 BLOCK_K=BLOCK_K)
        colsum = torch.empty(K, device=x.device, dtype=torch.float32)
        colsum_reduce_kernel[(triton.cdiv(K, BLOCK_K),)](part, colsum, K, SPLIT=SPLIT, BLOCK_K=BLOCK_K)
        out = torch.empty((B, 1), device=x.device, dtype=x.dtype)
        row_dot_kernel[(B,)](x, colsum, out, K, self.scaling_factor / 2, BLOCK_K=BLOCK_K)
        return out
