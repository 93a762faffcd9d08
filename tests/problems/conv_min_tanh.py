"""level2/25_Conv2d_Min_Tanh_Tanh's form at odd interpreter sizes: a convolution, the minimum over its ten channels
(fewer than a tile's columns; Inductor unrolls a reduction of up to eight into a pointwise kernel), tanh twice;
2 x 7 x 9 output pixels (no multiple of a tile's rows)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = torch.min(self.conv(x), dim=1, keepdim=True)[0]
        return torch.tanh(torch.tanh(x))


batch_size, in_channels, out_channels, height, width, kernel_size = 2, 5, 10, 9, 11, 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
