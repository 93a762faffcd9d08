# Test problem: forward has an argument with a default that get_inputs() does not give (as level3/47_NetVlad's
# mask=None and level3/48_Mamba2's initial_states=None), and no library call
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, x: torch.Tensor, mask=None):
        if mask is not None:
            x = x * mask
        return torch.relu(x * self.scale)


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
