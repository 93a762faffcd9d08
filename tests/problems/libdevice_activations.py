# Test problem: the activations whose Inductor kernels call libdevice (Softplus: log1p; ELU, SELU: expm1;
# tanh; asinh, atan: libdevice too), in one elementwise kernel: KernelBench level1/27, 29 and 31 in small
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.softplus(x) + F.elu(x, alpha=1.5) + torch.selu(x) + torch.tanh(x) + torch.asinh(x) * torch.atan(x)


batch_size = 4
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim) * 3]


def get_init_inputs():
    return []
