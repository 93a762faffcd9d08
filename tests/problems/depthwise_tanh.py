"""A depthwise convolution (kernelevo's depthwise kernel) with a scaled tanh after it, at odd interpreter sizes."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=1, groups=channels)
        self.scale = scale

    def forward(self, x):
        return torch.tanh(self.conv(x)) * self.scale


batch_size, channels, height, width, kernel_size, scale = 2, 3, 7, 9, 3, 1.5


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size, scale]
