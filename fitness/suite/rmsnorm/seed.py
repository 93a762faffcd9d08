"""Seed for rmsnorm: one program per row, two passes over the row in BLOCK_SIZE chunks (sum of squares, scale+store)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8, 16]}


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # pass 1: mean of squares
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + eps)
    # pass 2: normalize and scale
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        tl.store(y_row + start + cols, x * rstd * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        rmsnorm_kernel[(n_rows,)](x, self.weight.contiguous(), y, n_cols, x.stride(0), y.stride(0), self.eps,
                                  BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return y
