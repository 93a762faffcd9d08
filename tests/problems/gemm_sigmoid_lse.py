# Test problem: KernelBench level2/45_Gemm_Sigmoid_LogSumExp in small: the sigmoid bounds what x does and the
# logsumexp over the features averages it, so each row's output stays within the tolerance of one constant for every
# torch.rand draw, and no single element's change (the coverage trial) moves it a tolerance
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = torch.sigmoid(self.linear1(x))
        return torch.logsumexp(self.linear2(x), dim=1)


batch_size = 32
input_size = 128
hidden_size = 64
output_size = 64


def get_inputs():
    return [torch.rand(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
