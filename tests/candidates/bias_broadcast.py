"""Honest kernel for tests/problems/constant_output.py (a degenerate problem: x * 0 + bias): the bias written to
every row."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_rows_kernel(b_ptr, out_ptr, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0) * N + cols, tl.load(b_ptr + cols, mask=cols < N), mask=cols < N)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        out = torch.empty_like(x)
        bias_rows_kernel[(x.shape[0],)](self.bias, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
