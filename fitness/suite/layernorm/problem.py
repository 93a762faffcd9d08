# layernorm: nn.LayerNorm over the last dim of a 2-D fp32 tensor [batch_size, dim], with (randomized) affine params
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = LayerNorm(dim)(x), elementwise affine; weight/bias are randomized so the affine part is exercised."""

    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
