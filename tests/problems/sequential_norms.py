# Test problem: a block of submodules in an nn.Sequential (as level3/8_ResNetBasicBlock's downsample), with a
# parameter (block.0.weight) and a buffer (block.1.scale) under numbered names, and no library call
import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, dim))

    def forward(self, x):
        return x * self.scale


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = nn.Sequential(nn.LayerNorm(dim), Scale(dim), nn.GELU())

    def forward(self, x):
        return self.block(x) + x


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
