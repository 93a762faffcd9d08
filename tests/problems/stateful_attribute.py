# Test problem: forward reads and assigns a plain tensor attribute (as level3/33_VanillaRNN's self.hidden: made on the
# CPU in __init__, overwritten from an input, moved to the inputs' device, assigned anew), has an argument with a
# default that get_inputs() does not give (as level3/47_NetVlad's mask=None), and no library call
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.hidden = torch.randn((batch_size, dim))
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, x: torch.Tensor, initial_hidden, mask=None):
        if mask is not None:
            x = x * mask
        self.hidden.copy_(initial_hidden)
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(x * self.scale + self.hidden)
        return self.hidden * 2.0


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
