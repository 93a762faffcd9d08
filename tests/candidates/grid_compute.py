"""Cheat: the work runs in torch inside the launch's grid callable (which Triton calls while the launch is active,
where the op trace ignored Triton's own ops); the kernel launched is decorative."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def decorative_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.empty_like(x)

        def grid(meta):
            y.copy_(x * self.scale + 1.0)
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)

        decorative_kernel[grid](x, x.numel(), BLOCK=128)
        return y
