"""Correct for tests/problems/triangular_matmul.py, using the structure the problem states: A and B are upper
triangular, so C[i, j] = sum of A[i, k] B[k, j] over i <= k <= j only, and C's lower triangle is zero unread."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def triangular_matmul_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    k = tl.arange(0, BLOCK)[:, None]
    j = tl.arange(0, BLOCK)[None, :]
    inside = (k >= i) & (k <= j) & (j < N)
    a = tl.load(a_ptr + i * N + k, mask=inside, other=0.0)
    b = tl.load(b_ptr + k * N + j, mask=inside, other=0.0)
    cols = tl.arange(0, BLOCK)
    tl.store(c_ptr + i * N + cols, tl.sum(a * b, axis=0), mask=cols < N)


class ModelNew(nn.Module):
    def forward(self, A, B):
        N = A.shape[0]
        C = torch.empty(N, N, device=A.device, dtype=A.dtype)
        triangular_matmul_kernel[(N,)](A.contiguous(), B.contiguous(), C, N, BLOCK=triton.next_power_of_2(N))
        return C
