# matmul_bias_relu: nn.Linear (with bias) followed by ReLU, fp32, x[batch_size, in_features]
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x @ W^T + b)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


batch_size = 4096
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
