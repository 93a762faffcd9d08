# row_softmax: softmax over dim=1 of a 2-D fp32 tensor [batch_size, dim]
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = softmax(x, dim=1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
