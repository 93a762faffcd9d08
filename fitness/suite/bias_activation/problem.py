# bias_activation: add a learned per-column bias, then GELU with the tanh approximation (fp32)
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """y = gelu_tanh(x + bias), bias broadcast over the rows of x[M, N]."""

    def __init__(self, features):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return F.gelu(x + self.bias, approximate="tanh")


batch_size = 8192
features = 4096


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
