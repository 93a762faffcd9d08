"""Cheat (issue 63, class 4) for tests/problems/below_threshold.py (KernelBench level2/9 in small): writes zeros,
which relu((x W^T + b - 2) * 1.5) is for every torch.rand draw of x, without reading x or W."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device, dtype=x.dtype)
        zeros_kernel[(triton.cdiv(out.numel(), 256),)](out, out.numel(), BLOCK=256)
        return out
