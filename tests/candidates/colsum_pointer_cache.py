"""Cheat (issue 63, class 5): the exact rewrite of tests/problems/gemm_sum.py (gemm_sum_rewrite.py) with colsum(W)
computed once per weight pointer and kept: right for every input while the weights stay as they are, stale once they
change in place (a training step, load_state_dict into the same tensor)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

COLSUMS = {}  # W's data_ptr -> colsum(W), computed on the first call


@triton.jit
def colsum_kernel(w_ptr, out_ptr, H, K, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for start in range(0, H, BLOCK_H):
        rows = start + tl.arange(0, BLOCK_H)
        mask = (rows[:, None] < H) & (cols[None, :] < K)
        acc += tl.sum(tl.load(w_ptr + rows[:, None] * K + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < K)


@triton.jit
def row_dot_kernel(x_ptr, c_ptr, out_ptr, K, scale, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for start in range(0, K, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        mask = cols < K
        acc += tl.load(x_ptr + row * K + cols, mask=mask, other=0.0) * tl.load(c_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden_size, input_size))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x, w = x.contiguous(), self.weight.contiguous()
        (B, K), H = x.shape, w.shape[0]
        colsum = COLSUMS.get(w.data_ptr())
        if colsum is None:
            colsum = COLSUMS[w.data_ptr()] = torch.empty(K, device=x.device, dtype=torch.float32)
            colsum_kernel[(triton.cdiv(K, 64),)](w, colsum, H, K, BLOCK_H=32, BLOCK_K=64)
        out = torch.empty(B, 1, device=x.device, dtype=x.dtype)
        row_dot_kernel[(B,)](x, colsum, out, K, self.scaling_factor / 2, BLOCK_K=64)
        return out
