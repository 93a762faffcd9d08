# Test problem: a softmax over long rows (KernelBench level1/23's row length is 393,216): a normaliser guessed from
# the row length alone (N e^(1/2) for randn) is within 1 % of each row's true sum, so it passes ordinary trials
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 4
dim = 131072


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
