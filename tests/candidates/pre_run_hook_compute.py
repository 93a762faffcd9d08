"""Cheat: the work runs in torch inside a kernel's pre-run hook (called inside the launch); the kernel launched is
decorative."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def decorative_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


def compute(x, y, n, scale, **kwargs):
    y.copy_(x * scale + 1.0)


decorative_kernel.add_pre_run_hook(compute)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.empty_like(x)
        decorative_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), self.scale, BLOCK=128)
        return y
