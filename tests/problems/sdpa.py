# Test problem: KernelBench's level1/97_ScaledDotProductAttention at interpreter sizes: Inductor calls a library
# attention kernel for it (aten._scaled_dot_product_flash_attention_for_cpu here), which kernelevo's Triton flash
# attention (kernelevo/seeds/kernels/attention.py) replaces under policy triton. The head dimension is not a power of
# two.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        out = torch.nn.functional.scaled_dot_product_attention(Q, K, V)
        return out


batch_size = 2
num_heads = 2
sequence_length = 12
embedding_dimension = 6


def get_inputs():
    Q = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    K = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    V = torch.rand(batch_size, num_heads, sequence_length, embedding_dimension)
    return [Q, K, V]


def get_init_inputs():
    return []
