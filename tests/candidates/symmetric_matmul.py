"""Correct for tests/problems/symmetric_matmul.py, using the structure the problem states: A and B are symmetric,
so it reads only their upper triangles (A[i, k] as A[min(i, k), max(i, k)])."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def symmetric_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    k = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + tl.where(i <= k, i * N + k, k * N + i), mask=k < N, other=0.0)
    kk, jj = k[:, None], tl.arange(0, BLOCK)[None, :]
    b = tl.load(b_ptr + tl.where(kk <= jj, kk * N + jj, jj * N + kk), mask=(kk < N) & (jj < N), other=0.0)
    j = tl.arange(0, BLOCK)
    tl.store(c_ptr + i * N + j, tl.sum(a[:, None] * b, axis=0), mask=j < N)


class ModelNew(nn.Module):
    def forward(self, A, B):
        N = A.shape[0]
        C = torch.empty(N, N, device=A.device, dtype=A.dtype)
        symmetric_matmul_kernel[(N,)](A.contiguous(), B.contiguous(), C, N, BLOCK=triton.next_power_of_2(N))
        return C
