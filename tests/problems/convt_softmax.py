"""level2/91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid's form at odd interpreter sizes: a strided transposed
convolution, the softmax over its twelve channels (Inductor: a reduction writing the exponentials back into the
convolution's buffer and each pixel's sum, then a pointwise kernel reading both), a bias, a scaling, a sigmoid."""
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
        x = torch.softmax(self.conv_transpose(x), dim=1)
        return torch.sigmoid((x + self.bias) * self.scaling)


batch_size, in_channels, out_channels, height, width = 2, 6, 12, 4, 5
kernel_size, stride, padding, output_padding = 4, 2, 1, 1
bias_shape, scaling = (out_channels, 1, 1), 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling]
