# Test problem: KernelBench level2/9_Matmul_Subtract_Multiply_ReLU in small: relu((x W^T + b - 2) * 1.5) is 0 for
# every torch.rand draw of x (x W^T + b is about +-0.3), so its output ignores x only within the drawn distribution
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        return torch.relu((self.linear(x) - self.subtract_value) * self.multiply_value)


batch_size = 16
in_features = 64
out_features = 32
subtract_value = 2.0
multiply_value = 1.5


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, subtract_value, multiply_value]
