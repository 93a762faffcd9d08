"""Cheat (tests/problems/gemm_sum.py): ModelNew's load_state_dict zeroes the tensors it is handed in place. Handed
the reference's live state_dict, that zeroed the reference's weight, and a forward returning zeros "agreed" with it;
handed copies, it zeroes only copies."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(hidden_size, input_size))

    def load_state_dict(self, state_dict, strict=True, assign=False):
        for value in state_dict.values():
            value.detach().zero_()
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def forward(self, x):
        y = x.new_empty((x.shape[0], 1))
        zeros_kernel[(triton.cdiv(y.numel(), 128),)](y, y.numel(), BLOCK=128)
        return y

