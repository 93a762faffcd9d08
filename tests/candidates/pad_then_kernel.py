"""Legitimate: pads the rows to the block size with F.pad (data movement), runs an unmasked kernel, slices."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def scale_shift_rows(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * scale + 1.0)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        cols = x.shape[-1]
        padded = F.pad(x, (0, triton.cdiv(cols, BLOCK) * BLOCK - cols)).contiguous()
        y = torch.empty_like(padded)
        scale_shift_rows[(padded.numel() // BLOCK,)](padded, y, self.scale, BLOCK=BLOCK)
        return y[..., :cols]
