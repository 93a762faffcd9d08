# Test problem: a forward that warns (level2/28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply: nn.InstanceNorm2d on an
# input whose channels are not its num_features warns each call), which breaks Dynamo's graph unless reordered
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features)

    def forward(self, x, y):
        x = self.linear(x)
        x = self.instance_norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)
        return (x + y) * y


batch_size = 4
in_features = 16
out_features = 32


def get_inputs():
    return [torch.rand(batch_size, in_features), torch.rand(batch_size, out_features)]


def get_init_inputs():
    return [in_features, out_features]
