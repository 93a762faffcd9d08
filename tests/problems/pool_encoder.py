# Test problem: the two operators Inductor called directly in KernelBench (issue 43), at interpreter sizes, in one
# model so that one capture covers both: level1/46's average pooling with a 3x3x3 window at stride 2 (aten.avg_pool3d;
# here also ceil_mode and count_include_pad=False, so the divisor varies at the edges) and level3/32's
# nn.TransformerEncoderLayer (in eval() under no_grad one fused aten._transformer_encoder_layer_fwd). The pooled
# volume, 3 x 4 x 4, is the layer's embedding; the channels are its sequence.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
        self.layer = nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads, dim_feedforward=2 * embed_dim,
                                                dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(self.pool(x).flatten(2))


batch_size = 2
channels = 3
depth, height, width = 5, 6, 7


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return [48, 4]
