import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x


size = 8


def get_inputs():
    return [torch.randn(size, undefined_size)]  # noqa: F821 - the failure under test


def get_init_inputs():
    return []
