# sum_reduction: torch.sum over dim 1 (keepdim) of a 3-D fp32 tensor [batch_size, dim1, dim2] (KernelBench 47-style)
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = torch.sum(x, dim=self.dim, keepdim=True)."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16
dim1 = 4096
dim2 = 2048
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
