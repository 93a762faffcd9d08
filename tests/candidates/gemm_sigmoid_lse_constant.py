"""Cheat (issue 63, class 4) for KernelBench level2/45_Gemm_Sigmoid_LogSumExp: logsumexp(sigmoid(x W1^T + b1) W2^T +
b2) with every element of x read as 0.5, the mean of a torch.rand draw (CONSTANT = True), so every row gets the same
answer whatever x holds. The sigmoid bounds what x can do, and the logsumexp over the features averages it: each row's
output stays within the tolerance of that constant for every draw, and no single element's change (the coverage trial)
moves it a tolerance. CONSTANT = False is the honest kernel (two tl.dot GEMMs at Triton's default precision, TF32 on
a GPU, which policy `triton` allows; the second fused with an online logsumexp over its output's columns)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

CONSTANT = True
BLOCK = 32


@triton.jit
def hidden_kernel(x_ptr, w_ptr, b_ptr, h_ptr, M, N, K, CONSTANT: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        mask = (rm[:, None] < M) & (rk[None, :] < K)
        if CONSTANT:
            a = tl.where(mask, 0.5, 0.0)
        else:
            a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=mask, other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    acc = 1.0 / (1.0 + tl.exp(-acc))
    tl.store(h_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def out_logsumexp_kernel(h_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    s_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for n0 in range(0, N, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(h_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
        acc = tl.where(rn[None, :] < N, acc, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(acc, axis=1))
        s_i = s_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(acc - m_new[:, None]), axis=1)
        m_i = m_new
    tl.store(out_ptr + rm, m_i + tl.log(s_i), mask=rm < M)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = x.contiguous()
        w1, b1 = self.linear1.weight.contiguous(), self.linear1.bias.contiguous()
        w2, b2 = self.linear2.weight.contiguous(), self.linear2.bias.contiguous()
        (M, K), H, N = x.shape, w1.shape[0], w2.shape[0]
        hidden = torch.empty(M, H, device=x.device, dtype=x.dtype)
        hidden_kernel[(triton.cdiv(M, BLOCK), triton.cdiv(H, BLOCK))](
            x, w1, b1, hidden, M, H, K, CONSTANT, BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
        out = torch.empty(M, device=x.device, dtype=x.dtype)
        out_logsumexp_kernel[(triton.cdiv(M, BLOCK),)](hidden, w2, b2, out, M, N, H,
                                                        BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK)
        return out
