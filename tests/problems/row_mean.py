# Test problem: a row-wise reduction (the mean of each row) on inputs of low variance, so that an estimate from a
# subsample of each row's elements passes ordinary trials: only the coverage trial tells. Its second input is
# ignored by the reference, as a kernel may ignore it too.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, unused):
        return torch.mean(x, dim=1)


rows = 32
cols = 512


def get_inputs():
    return [torch.rand(rows, cols) * 0.1 + 1.0, torch.randn(rows, cols)]


def get_init_inputs():
    return []
