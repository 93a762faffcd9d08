import torch
import torch.nn as nn
import triton
import triton.language as tl

NUM_WARPS = 16
TUNABLE = {"NUM_WARPS": [4, 8, 16, 32]}


@triton.jit
def row_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        row_softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
        return y
