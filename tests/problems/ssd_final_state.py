"""An ill-conditioned problem (the final state of KernelBench level3/49's Mamba2 SSD, without einops): exponentials of
cumulative sums of random numbers weight sums that cancel, so a few output elements of ordinary magnitude are small
differences of huge terms, and an honest reordering differs from the fp32 reference there by several per cent."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, batch_size, seq_length, n_heads, d_head, d_state, block_len=64):
        super().__init__()
        self.block_len = block_len
        self.A = nn.Parameter(torch.randn(batch_size, seq_length, n_heads))
        self.B = nn.Parameter(torch.randn(batch_size, seq_length, n_heads, d_state))

    @staticmethod
    def segsum(x):
        t = x.size(-1)
        x_cumsum = torch.cumsum(x, dim=-1)
        x_segsum = x_cumsum[..., :, None] - x_cumsum[..., None, :]
        mask = torch.tril(torch.ones(t, t, device=x.device, dtype=bool), diagonal=0)
        return x_segsum.masked_fill(~mask, -torch.inf)

    def forward(self, X):
        b, length, h, p = X.shape
        c, l = length // self.block_len, self.block_len
        x_blocks = X.reshape(b, c, l, h, p)
        b_blocks = self.B.reshape(b, c, l, h, -1)
        a_blocks = self.A.reshape(b, c, l, h).permute(0, 3, 1, 2)  # b h c l
        a_cumsum = torch.cumsum(a_blocks, dim=-1)
        decay_states = torch.exp(a_cumsum[:, :, :, -1:] - a_cumsum)
        states = torch.einsum("bclhn,bhcl,bclhp->bchpn", b_blocks, decay_states, x_blocks)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        decay_chunk = torch.exp(self.segsum(F.pad(a_cumsum[:, :, :, -1], (1, 0))))
        return torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)[:, -1]


batch_size, seq_length, n_heads, d_head, d_state, block_len = 128, 128, 4, 16, 8, 64


def get_inputs():
    return [torch.rand(batch_size, seq_length, n_heads, d_head)]


def get_init_inputs():
    return [batch_size, seq_length, n_heads, d_head, d_state, block_len]
