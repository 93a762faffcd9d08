"""Seed for sum_reduction: view x as [outer, R, inner]; each program sums a [R, BLOCK_N] column strip in BLOCK_R chunks."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_R = 32
BLOCK_N = 64
NUM_WARPS = 4
TUNABLE = {"BLOCK_R": [4, 8, 16, 32, 64], "BLOCK_N": [16, 32, 64, 128, 256], "NUM_WARPS": [2, 4, 8]}


@triton.jit
def sum_dim_kernel(x_ptr, y_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_outer = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < inner
    offs_r = tl.arange(0, BLOCK_R)
    x_base = x_ptr + pid_outer * R * inner
    acc = tl.zeros([BLOCK_R, BLOCK_N], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + offs_r
        mask = (rows < R)[:, None] & mask_n[None, :]
        acc += tl.load(x_base + rows[:, None] * inner + offs_n[None, :], mask=mask, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(y_ptr + pid_outer * inner + offs_n, total, mask=mask_n)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        d = self.dim % x.dim()
        R = x.shape[d]
        outer = 1
        for s in x.shape[:d]:
            outer *= s
        inner = 1
        for s in x.shape[d + 1:]:
            inner *= s
        out_shape = list(x.shape)
        out_shape[d] = 1
        y = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        grid = (outer, triton.cdiv(inner, BLOCK_N))
        sum_dim_kernel[grid](x, y, R, inner, BLOCK_R=BLOCK_R, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return y
