"""A forward that draws random numbers, as KernelBench level3/35_LSTM draws its initial state (``torch.randn``
when h0 is not given): the draw is part of the problem, so a kernel must draw the same numbers from torch's
generator (the judge seeds it alike before the reference's and the candidate's forward)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features
        self.scale = nn.Parameter(torch.randn(features))

    def forward(self, x):
        state = torch.randn(x.shape[0], self.features, device=x.device)
        return torch.tanh(x * self.scale + state)


batch_size = 8
features = 16


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
