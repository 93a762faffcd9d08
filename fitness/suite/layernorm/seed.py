"""Seed for layernorm: one program per row, three passes over the row in BLOCK_SIZE chunks (mean, variance, normalize+affine)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8, 16]}


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps,
                     BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # pass 1: mean
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        acc += tl.load(x_row + start + cols, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    # pass 2: biased variance
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    var = tl.sum(acc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    # pass 3: normalize, scale and shift
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0)
        tl.store(y_row + start + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        # same parameter names/shapes (and init) as Model; the module itself is never called
        self.ln = nn.LayerNorm(dim)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        layernorm_kernel[(n_rows,)](x, self.ln.weight.contiguous(), self.ln.bias.contiguous(), y, n_cols,
                                    x.stride(0), y.stride(0), self.ln.eps,
                                    BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return y
