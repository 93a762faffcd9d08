"""Exact rewrite of KernelBench level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: after the sum over the linear
layer's outputs every later op (max, mean, logsumexp twice) acts on a dimension of size 1 and returns its input, so
the output is x[b] . colsum(W) + sum(bias): no GEMM. W's column sums in two deterministic stages, the bias summed
once, then each row's dot product. The same result up to fp32 reassociation."""
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
def colsum_reduce_kernel(part_ptr, bias_ptr, out_ptr, bias_sum_ptr, K, H, SPLIT: tl.constexpr,
                         BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    parts = tl.arange(0, SPLIT)
    mask = (parts[:, None] < SPLIT) & (cols[None, :] < K)
    total = tl.sum(tl.load(part_ptr + parts[:, None] * K + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, total, mask=cols < K)
    if tl.program_id(0) == 0:  # the bias's sum, once
        acc = tl.zeros([BLOCK_K], dtype=tl.float32)
        for start in range(0, H, BLOCK_K):
            offs = start + tl.arange(0, BLOCK_K)
            acc += tl.load(bias_ptr + offs, mask=offs < H, other=0.0)
        tl.store(bias_sum_ptr, tl.sum(acc, axis=0))


@triton.jit
def row_dot_kernel(x_ptr, c_ptr, bias_sum_ptr, out_ptr, K, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        mask = cols < K
        acc += tl.load(x_ptr + row * K + cols, mask=mask, other=0.0) * tl.load(c_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) + tl.load(bias_sum_ptr))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x, w, b = x.contiguous(), self.linear.weight.contiguous(), self.linear.bias.contiguous()
        (B, K), H = x.shape, w.shape[0]
        rows_per_split = triton.cdiv(H, SPLIT)
        part = torch.empty((SPLIT, K), device=x.device, dtype=torch.float32)
        colsum_partial_kernel[(triton.cdiv(K, BLOCK_K), SPLIT)](w, part, H, K, rows_per_split, BLOCK_H=BLOCK_H,
                                                                 BLOCK_K=BLOCK_K)
        colsum = torch.empty(K, device=x.device, dtype=torch.float32)
        bias_sum = torch.empty(1, device=x.device, dtype=torch.float32)
        colsum_reduce_kernel[(triton.cdiv(K, BLOCK_K),)](part, b, colsum, bias_sum, K, H, SPLIT=SPLIT,
                                                         BLOCK_K=BLOCK_K)
        out = torch.empty((B, 1), device=x.device, dtype=x.dtype)
        row_dot_kernel[(B,)](x, colsum, bias_sum, out, K, BLOCK_K=BLOCK_K)
        return out
