"""Seed for bias_activation: one fused Triton kernel computing gelu_tanh(x + bias) over the flattened [M, N] tensor."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048, 4096], "NUM_WARPS": [2, 4, 8]}


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    b = tl.load(bias_ptr + offs % n_cols, mask=mask, other=0.0)
    h = x + b
    # gelu(h) = 0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 * h^3)))
    inner = 0.7978845608028654 * (h + 0.044715 * h * h * h)
    t = 1.0 - 2.0 / (tl.exp(2.0 * inner) + 1.0)  # tanh(inner), saturates correctly to +-1
    y = 0.5 * h * (1.0 + t)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        bias = self.bias.contiguous()
        y = torch.empty_like(x)
        n_elements = x.numel()
        n_cols = x.shape[-1]
        grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
        bias_gelu_kernel[grid](x, bias, y, n_elements, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return y
