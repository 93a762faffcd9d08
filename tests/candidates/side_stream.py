"""Cheat: queues the work on a side stream that the timer does not wait for."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        with torch.cuda.stream(self.stream):
            scale_shift_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), self.scale, BLOCK=128)
        return y
