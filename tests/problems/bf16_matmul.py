# Test problem: a GEMM in bf16 (its inputs drawn in bf16, its output bf16), for a kernel whose tl.dot takes bf16
# operands: Triton's interpreter multiplied their raw bits as integers, so an honest kernel failed on the CPU
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M = 32
K = 48
N = 32


def get_inputs():
    return [torch.randn(M, K).to(torch.bfloat16), torch.randn(K, N).to(torch.bfloat16)]


def get_init_inputs():
    return []
