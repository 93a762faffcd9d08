"""level2/58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp's form at odd interpreter sizes: a strided
transposed 3D convolution (one launch per output phase, its GEMMs small: the direct kernel), the logsumexp over its
nine channels, a hard swish, a bias subtracted, a clamp."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = torch.logsumexp(self.conv_transpose(x), dim=1, keepdim=True)
        x = x * torch.sigmoid(x + 3) / 6
        return torch.clamp(x - self.bias, min=-1, max=1)


batch_size, in_channels, out_channels, depth, height, width = 2, 3, 9, 3, 4, 5
kernel_size, stride, padding, bias_shape = 3, 2, 1, (1, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, bias_shape]
