# Test problem: KernelBench level2/75_Gemm_GroupNorm_Min_BiasAdd at its own sizes, for the interpreter's shrink rule:
# out_features must stay a multiple of num_groups, and once the rule halved it down to num_groups every group held
# one feature, which normalises to 0: the output was the bias alone
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.group_norm(self.gemm(x))
        return torch.min(x, dim=1, keepdim=True)[0] + self.bias


batch_size = 1024
in_features = 8192
out_features = 8192
num_groups = 512
bias_shape = (1, out_features, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
