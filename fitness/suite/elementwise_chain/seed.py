"""Seed for elementwise_chain: one fused Triton kernel computing x * sigmoid(x) * 2 + 1 over the flattened tensor."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8]}


@triton.jit
def silu_scale_shift_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    sig = 1.0 / (1.0 + tl.exp(-x))
    y = x * sig * 2.0 + 1.0
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_elements = x.numel()
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        silu_scale_shift_kernel[grid](x, y, n_elements, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return y
