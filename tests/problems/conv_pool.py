"""A convolution whose output is max-pooled and, in the same forward, normalised over each sample: the pointwise
work reads other positions than it writes (pooling) or several of them (a reduction), so it is no epilogue."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return torch.max_pool2d(y, 2) - y.mean(dim=(1, 2, 3), keepdim=True)[:, :, :1, :1]


batch_size, in_channels, out_channels, height, width, kernel_size = 2, 4, 5, 9, 9, 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
