# Test problem: a mean-squared-error loss over rows (KernelBench level1/94_MSELoss in small), on inputs of low
# variance so that an estimate from a subsample of the rows passes ordinary trials: only the coverage trial tells
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.mean((predictions - targets) ** 2)


rows = 256
cols = 128


def get_inputs():
    return [torch.rand(rows, cols) * 0.1 + 1.0, torch.rand(rows, cols) * 0.1]


def get_init_inputs():
    return []
