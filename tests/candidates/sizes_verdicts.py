"""Correct at 4 x 60 (scale_shift with problem.sizes.dim=60), in three variants chosen by VARIANT, one per verdict at
other sizes (evo/runs/other_sizes.py): 0 reads its sizes from its input (runs-correct); 1 is built for 4 x 60 and
its forward says so, a ValueError before any launch at another shape (refuses-cleanly, as a converted seed's guard:
kernelevo/seeds/inductor/input_guard.py); 2 has a wrong mask: it assumes its block of 16 divides the input's size, true
of 240 elements but not of 4 x 45 or 4 x 43, whose tail it leaves unwritten (defective)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

VARIANT = 0
TUNABLE = {"VARIANT": [0, 1, 2]}


@triton.jit
def scale_shift_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, WHOLE_BLOCKS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < (n // BLOCK) * BLOCK if WHOLE_BLOCKS else offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        if VARIANT == 1 and tuple(x.shape) != (4, 60):
            raise ValueError(f"ModelNew.forward: x expected shape (4, 60), given shape {tuple(x.shape)}")
        x = x.contiguous()
        y = torch.zeros_like(x)
        scale_shift_kernel[(triton.cdiv(x.numel(), 16),)](x, y, x.numel(), self.scale, BLOCK=16,
                                                          WHOLE_BLOCKS=VARIANT == 2)
        return y
