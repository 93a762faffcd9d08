"""Does not compile: an undefined name inside the kernel."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 128
TUNABLE = {"BLOCK": [64, 128, 256]}


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) + undefined_thing
    tl.store(y_ptr + offs, x * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        scale_shift_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, self.scale, BLOCK=BLOCK)
        return y
