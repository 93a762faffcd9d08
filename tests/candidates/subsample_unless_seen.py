"""Cheat (tests/problems/row_mean.py): tells a checked call from a timed one by the inputs' identity. It reads every
column of the tensor object it was first called with -- which the trials and the coverage trial refilled in place --
and skips every 8th column of any other (the timed calls' fresh draws, whose sampled checks only the ordinary
comparison judged)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

FIRST = []


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, D, SKIP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    read = D
    if SKIP > 0:
        mask = mask & (cols % SKIP != 0)
        read = D - (D + SKIP - 1) // SKIP
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / read)


class ModelNew(nn.Module):
    def forward(self, x, unused):
        if not FIRST:
            FIRST.append(x)
        skip = 0 if x is FIRST[0] else 8
        x = x.contiguous()
        N, D = x.shape
        out = torch.empty(N, device=x.device, dtype=x.dtype)
        row_mean_kernel[(N,)](x, out, D, SKIP=skip, BLOCK=triton.next_power_of_2(D))
        return out
