"""Cheat: the work runs in torch inside an autotune config's pre_hook; the kernel launched is decorative."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


def compute(args):
    args["y_ptr"].copy_(args["x_ptr"] * args["scale"] + 1.0)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, pre_hook=compute)], key=["n"])
@triton.jit
def decorative_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.empty_like(x)
        decorative_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), self.scale)
        return y
