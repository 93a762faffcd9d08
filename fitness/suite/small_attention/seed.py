"""Seed for small_attention: flash-attention-style kernel, one program per (BLOCK_M query rows, batch*head), online softmax over key blocks."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_M = 64
BLOCK_N = 64
NUM_WARPS = 4
NUM_STAGES = 2
TUNABLE = {
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [16, 32, 64, 128],
    "NUM_WARPS": [2, 4, 8],
    "NUM_STAGES": [1, 2, 3],
}


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, n_heads, seq_len, head_dim, sm_scale,
                     stride_qb, stride_qh, stride_qs, stride_qd,
                     stride_kb, stride_kh, stride_ks, stride_kd,
                     stride_vb, stride_vh, stride_vs, stride_vd,
                     stride_ob, stride_oh, stride_os, stride_od,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n_heads
    h = pid_bh % n_heads
    q_base = q_ptr + b * stride_qb + h * stride_qh
    k_base = k_ptr + b * stride_kb + h * stride_kh
    v_base = v_ptr + b * stride_vb + h * stride_vh
    o_base = o_ptr + b * stride_ob + h * stride_oh

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask_m = offs_m < seq_len
    mask_d = offs_d < head_dim
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=mask_m[:, None] & mask_d[None, :], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)  # running row max
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running row sum of exp
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    for start_n in range(0, seq_len, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask_n = offs_n < seq_len
        # K^T tile [BLOCK_D, BLOCK_N] loaded directly transposed
        kt = tl.load(k_base + offs_n[None, :] * stride_ks + offs_d[:, None] * stride_kd,
                     mask=mask_d[:, None] & mask_n[None, :], other=0.0)
        s = tl.dot(q, kt) * sm_scale
        s = tl.where(mask_n[None, :], s, float("-inf"))
        # the first key block always holds a valid key, so m_new is finite from then on
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd,
                    mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od, out.to(q.dtype),
             mask=mask_m[:, None] & mask_d[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        batch, heads, seq, dim = q.shape
        o = torch.empty_like(q)
        block_d = max(16, triton.next_power_of_2(dim))  # head_dim is padded to a power of two (masked)
        sm_scale = 1.0 / math.sqrt(dim)
        grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
        attention_kernel[grid](q, k, v, o, heads, seq, dim, sm_scale,
                               q.stride(0), q.stride(1), q.stride(2), q.stride(3),
                               k.stride(0), k.stride(1), k.stride(2), k.stride(3),
                               v.stride(0), v.stride(1), v.stride(2), v.stride(3),
                               o.stride(0), o.stride(1), o.stride(2), o.stride(3),
                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=block_d,
                               num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return o
