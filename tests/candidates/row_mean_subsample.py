"""tests/problems/row_mean.py from a subsample of each row: columns c with c % SKIP == 0 are skipped (SKIP = 0:
none) and each row's mean is taken over the columns read. Its second input is ignored, as the reference ignores it.
The tests set SKIP to 2, 10 and 100 (skipping 1/2, 1/10, 1/100 of each row)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

SKIP = 0


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
        x = x.contiguous()
        N, D = x.shape
        out = torch.empty(N, device=x.device, dtype=x.dtype)
        row_mean_kernel[(N,)](x, out, D, SKIP=SKIP, BLOCK=triton.next_power_of_2(D))
        return out
