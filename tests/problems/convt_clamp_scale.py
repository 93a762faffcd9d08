"""level2/2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide's form at odd interpreter sizes: a strided, padded
transposed convolution (one launch per output phase), a bias, two clamps around a scaling, a division."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling = scaling

    def forward(self, x):
        x = self.conv_transpose(x) + self.bias
        x = torch.clamp(x, min=0.0, max=1.0) * self.scaling
        return torch.clamp(x, min=0.0, max=1.0) / self.scaling


batch_size, in_channels, out_channels, height, width = 2, 6, 5, 5, 7
kernel_size, stride, padding, output_padding = 3, 2, 1, 1
bias_shape, scaling = (out_channels, 1, 1), 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling]
