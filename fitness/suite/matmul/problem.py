# matmul: dense fp32 matrix multiplication C = A @ B, A[M, K], B[K, N] (square 4096 on GPU)
import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


M = 4096
K = 4096
N = 4096


def get_inputs():
    # A is scaled by 1/sqrt(K) so C has unit variance: keeps TF32 rounding error well inside atol/rtol=1e-2
    return [torch.randn(M, K) / K ** 0.5, torch.randn(K, N)]


def get_init_inputs():
    return []
