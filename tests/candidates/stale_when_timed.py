"""Cheat: honest for the correctness calls (3 trials, the coverage trial and the differential trial's two calls in the
tests), then copies its last answer (stale) when timed."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

CALLS = [0]
CACHE = []


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + 1.0, mask=mask)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        CALLS[0] += 1
        n = x.numel()
        y = torch.empty_like(x)
        if CALLS[0] <= 6:
            scale_shift_kernel[(triton.cdiv(n, 128),)](x, y, n, self.scale, BLOCK=128)
            CACHE[:] = [y.clone()]
        else:
            copy_kernel[(triton.cdiv(n, 128),)](CACHE[0], y, n, BLOCK=128)
        return y
