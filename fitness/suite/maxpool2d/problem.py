# maxpool2d: nn.MaxPool2d(kernel_size=3, stride=2, padding=1) on an fp32 NCHW tensor (overlapping windows + padding)
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = MaxPool2d(kernel_size, stride, padding)(x)."""

    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


batch_size = 16
channels = 64
height = 256
width = 256
kernel_size = 3
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
