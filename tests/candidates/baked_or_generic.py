"""Correct at 4 x 60 (scale_shift with problem.sizes.dim=60), in two variants chosen by BAKED: 1 has those sizes as
literals, as a kernel converted from torch.compile's capture at the test sizes has (its launch is bounded by x's
size only so that other sizes fail cleanly, on the output's shape); 0 reads them from its input and launches its
kernel REPEAT times (the same values each time), so that on the interpreter it is much the slower."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BAKED = 0
REPEAT = 30
TUNABLE = {"BAKED": [0, 1]}


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        if BAKED:
            y = torch.empty((4, 60), dtype=x.dtype, device=x.device)
            scale_shift_kernel[(2,)](x, y, min(240, x.numel()), self.scale, BLOCK=128)
            return y
        y = torch.empty_like(x)
        for _ in range(REPEAT):
            scale_shift_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), self.scale, BLOCK=128)
        return y
