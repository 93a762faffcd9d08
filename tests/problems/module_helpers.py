# Test problem: level3/29_SwinMLP's form, tiny. Its submodule's constructor calls a helper the module builds from a
# closure (to_2tuple = _ntuple(2)); a module statement built from the sizes (input_shape) is for get_inputs only.
import collections.abc
from itertools import repeat

import torch
import torch.nn as nn


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    return parse


to_2tuple = _ntuple(2)


class PatchScale(nn.Module):
    def __init__(self, patch_size):
        super().__init__()
        self.patch_size = to_2tuple(patch_size)
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, self.patch_size[0] * self.patch_size[1]))

    def forward(self, x):
        return x * self.weight


class Model(nn.Module):
    def __init__(self, patch_size):
        super().__init__()
        self.scale = PatchScale(patch_size)

    def forward(self, x):
        return torch.relu(self.scale(x)) + 1.0


batch_size = 8
patch_size = 4
input_shape = (batch_size, patch_size * patch_size)


def get_inputs():
    return [torch.randn(*input_shape)]


def get_init_inputs():
    return [patch_size]
