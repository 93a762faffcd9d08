# Test problem: tests/problems/gemm_sum.py (KernelBench level2/14_Gemm_Divide_Sum_Scaling in small) with the
# cancellation of its full size made certain: the weight's rows come in pairs +-P (integers times 4096) plus 1, so
# every column of W sums to exactly hidden_size, while each (x W^T)[b, h] is ~1e5 and their partial sums over h
# ~1e6; the first rows of x are (r, -r), so out[b] = (s/2) x[b] . colsum(W) is exactly 0 there. The fp32 reference's
# own rounding (~0.1-1) exceeds atol at those rows; the exact rewrite x . colsum(W) (tests/candidates/
# gemm_sum_rewrite.py) is right to ~1e-5. Every value of W, x W^T and the sums is exact in float64.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        pairs = torch.randint(-50, 51, (hidden_size // 2, input_size)).float() * 4096
        self.weight = nn.Parameter(torch.cat([pairs, -pairs]) + 1.0)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = torch.matmul(x, self.weight.T)
        x = x / 2
        x = torch.sum(x, dim=1, keepdim=True)
        return x * self.scaling_factor


batch_size = 64
input_size = 32
hidden_size = 48
scaling_factor = 1.5
zero_rows = 8


def get_inputs():
    x = torch.rand(batch_size, input_size)
    half = input_size // 2
    x[:zero_rows, half:] = -x[:zero_rows, :half]
    return [x]


def get_init_inputs():
    return [input_size, hidden_size, scaling_factor]
