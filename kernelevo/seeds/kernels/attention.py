"""kernelevo's own Triton attention: the forward of scaled dot product attention (``softmax(Q Kᵀ · scale) V``, the
ATen ops ``_scaled_dot_product_flash_attention[_for_cpu]``, ``_efficient_attention``, ``_cudnn_attention``) as one
flash-attention kernel.

A program owns BLOCK_M query rows of one (batch, head) and VALUE_BLOCK columns of the value's head dimension; it
walks the keys in tiles of BLOCK_N, computing the tile's scores Q Kᵀ in chunks of BLOCK_K of the head dimension
(``tl.dot``, accumulating in fp32; the query rows are loaded once where one chunk holds the whole head dimension),
and keeps an online softmax (the running row maximum and sum, in base 2): each tile's probabilities, in the value's
dtype, are multiplied into the fp32 accumulator, rescaled as the maximum grows; the output is the accumulator over
the row sum, and the program of the first value columns writes the row's logsumexp (natural log, of the scaled
scores) as the ATen ops do. Head dimensions that are not a power of two (or not a multiple of a block) are masked;
where the value's head dimension is wider than VALUE_BLOCK, programs for its other columns compute the scores again
(KernelBench's level1/97 has 1,024). ``is_causal`` masks key j of query i where j > i (the top-left alignment of
torch's SDPA). Leading dimensions: any number (batch, heads, ...); keys and values may have fewer heads than the
queries (grouped-query attention: head h reads key head h // (heads / key heads)). fp32, bf16 and fp16 inputs.
An attention mask or dropout is refused (ValueError): this kernel computes neither.

The launch knobs are named so that ``hardware_profiles.limits`` checks the tiles of the Q Kᵀ product (BLOCK_M x
BLOCK_N scores, BLOCK_M and BLOCK_N x BLOCK_K operands, with BLOCK_K as a GEMM's contraction); VALUE_BLOCK (the
accumulator's columns) is not multiplied into them. Programs run over a 1D grid, query blocks fastest, so the
programs of one head run together and share its keys and values in L2. Addresses are int64 at the batch and head.

This file is standalone (torch and triton only): ``kernelevo.seeds.inductor.attentions`` copies it into a seed whose
Inductor code called a library attention op, where each call becomes ``flash_attention(...)`` with its launch parameters
as the seed's tunable constants.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr):
    if UPCAST:  # Triton's CPU interpreter multiplies bf16 tiles as their raw bits: the same products in fp32
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision="ieee")


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr,
                           BH, H, H_KV, LQ, LK, E, EV, scale_log2,
                           sqz, sqh, sqm, sqe, skz, skh, skn, ske, svz, svh, svn, sve,
                           soz, soh, som, soe, slz, slh, slm,
                           CAUSAL: tl.constexpr, Q_RESIDENT: tl.constexpr, UPCAST: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           VALUE_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    m_blocks = tl.cdiv(LQ, BLOCK_M)
    pid_m = pid % m_blocks
    rest = pid // m_blocks
    zh = rest % BH  # batch x heads
    pid_dv = rest // BH
    z = (zh // H).to(tl.int64)
    h = zh % H
    h_kv = (h // (H // H_KV)).to(tl.int64)
    h = h.to(tl.int64)
    q_base = q_ptr + z * sqz + h * sqh
    k_base = k_ptr + z * skz + h_kv * skh
    v_base = v_ptr + z * svz + h_kv * svh

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_dv = pid_dv * VALUE_BLOCK + tl.arange(0, VALUE_BLOCK)
    mask_m = offs_m < LQ
    mask_dv = offs_dv < EV
    if Q_RESIDENT:  # the whole head dimension in one chunk: the query rows stay in registers
        q = tl.load(q_base + offs_m[:, None] * sqm + offs_k[None, :] * sqe,
                    mask=mask_m[:, None] & (offs_k[None, :] < E), other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, VALUE_BLOCK], dtype=tl.float32)
    hi = LK
    if CAUSAL:  # keys past the block's last query row are masked for all its rows
        hi = tl.minimum(LK, (pid_m + 1) * BLOCK_M)
    for n0 in range(0, hi, BLOCK_N):
        cols = n0 + offs_n
        mask_n = cols < LK
        if Q_RESIDENT:
            kt = tl.load(k_base + cols[None, :] * skn + offs_k[:, None] * ske,
                         mask=mask_n[None, :] & (offs_k[:, None] < E), other=0.0)
            s = _dot(q, kt, tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), UPCAST)
        else:
            s = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for k0 in range(0, E, BLOCK_K):
                dims = k0 + offs_k
                qc = tl.load(q_base + offs_m[:, None] * sqm + dims[None, :] * sqe,
                             mask=mask_m[:, None] & (dims[None, :] < E), other=0.0)
                kt = tl.load(k_base + cols[None, :] * skn + dims[:, None] * ske,
                             mask=mask_n[None, :] & (dims[:, None] < E), other=0.0)
                s = _dot(qc, kt, s, UPCAST)
        s = s * scale_log2
        valid = mask_n[None, :]
        if CAUSAL:
            valid = valid & (cols[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: nothing to rescale
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * svn + offs_dv[None, :] * sve, mask=mask_n[:, None] & mask_dv[None, :],
                    other=0.0)
        acc = _dot(p.to(v.dtype), v, acc * alpha[:, None], UPCAST)
        m_i = m_new
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    out = acc / l_safe[:, None]
    out_base = out_ptr + z * soz + h * soh
    tl.store(out_base + offs_m[:, None] * som + offs_dv[None, :] * soe, out.to(out_ptr.dtype.element_ty),
             mask=mask_m[:, None] & mask_dv[None, :])
    if pid_dv == 0:
        lse = (m_i + tl.log2(l_safe)) * 0.6931471805599453  # base 2 back to the natural log
        tl.store(lse_ptr + z * slz + h * slh + offs_m * slm, lse, mask=mask_m)


def _heads(x, name: str):
    """`x` (..., L, E) as (batch, heads, L, E): a 2D tensor one head of one batch, a 3D one heads of one batch,
    more leading dimensions flattened into the batch (a view where the layout allows)."""
    if x.dim() < 2:
        raise ValueError(f"flash_attention: {name} has {x.dim()} dimension(s); it needs (..., sequence, head dim)")
    if x.dim() <= 4:
        return x[(None,) * (4 - x.dim())]
    return x.reshape(-1, *x.shape[-3:])


def flash_attention(query, key, value, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None, out_stride=None,
                    lse_stride=None, BLOCK_M=64, BLOCK_N=32, BLOCK_K=64, VALUE_BLOCK=128, num_warps=4,
                    num_stages=2):
    """``(output, logsumexp)`` of ``scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
    scale)`` by ``flash_attention_kernel``, as the ATen attention ops return them (output: the query's leading
    dimensions and sequence by the value's head dimension, in the query's dtype; logsumexp: fp32, the query's
    leading dimensions and sequence), with strides `out_stride` / `lse_stride` where given (the layouts Inductor's
    code reads them in), else contiguous. BLOCK_K and VALUE_BLOCK are caps: a head dimension smaller than the cap
    takes the power of two that holds it (at least 16, tl.dot's least)."""
    if attn_mask is not None:
        raise ValueError("flash_attention takes no attn_mask (kernelevo's Triton attention computes plain or causal "
                         "attention only): keep the library call for a masked attention")
    if dropout_p:
        raise ValueError(f"flash_attention takes no dropout (dropout_p={dropout_p}): keep the library call for it")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"flash_attention: query, key and value must have one dtype, not {query.dtype}, {key.dtype}, "
                         f"{value.dtype}")
    q, k, v = _heads(query, "query"), _heads(key, "key"), _heads(value, "value")
    batch, heads, lq, e = q.shape
    heads_kv, lk, ev = k.shape[1], k.shape[2], v.shape[3]
    if k.shape[0] != batch or v.shape[:3] != k.shape[:3] or k.shape[3] != e or heads % heads_kv:
        raise ValueError(f"flash_attention: shapes query {tuple(query.shape)}, key {tuple(key.shape)}, value "
                         f"{tuple(value.shape)} do not fit (..., L, E), (..., S, E), (..., S, Ev) with the query's "
                         f"heads a multiple of the key's")
    shape, lse_shape = (*query.shape[:-1], ev), tuple(query.shape[:-1])
    out = torch.empty(shape, dtype=query.dtype, device=query.device) if out_stride is None else \
        torch.empty_strided(shape, out_stride, dtype=query.dtype, device=query.device)
    lse = torch.empty(lse_shape, dtype=torch.float32, device=query.device) if lse_stride is None else \
        torch.empty_strided(lse_shape, lse_stride, dtype=torch.float32, device=query.device)
    out4 = _heads(out, "output") if out.dim() <= 4 else out.view(-1, *out.shape[-3:])  # written in place
    lse4 = lse[(None,) * (3 - lse.dim())] if lse.dim() <= 3 else lse.view(-1, *lse.shape[-2:])
    block_k = max(16, min(BLOCK_K, triton.next_power_of_2(e)))
    value_block = max(16, min(VALUE_BLOCK, triton.next_power_of_2(ev)))
    scale = e ** -0.5 if scale is None else scale
    grid = (triton.cdiv(lq, BLOCK_M) * batch * heads * triton.cdiv(ev, value_block),)
    if grid[0]:
        flash_attention_kernel[grid](q, k, v, out4, lse4, batch * heads, heads, heads_kv, lq, lk, e, ev,
                                     scale * 1.4426950408889634, *q.stride(), *k.stride(), *v.stride(),
                                     *out4.stride(), *lse4.stride(), CAUSAL=bool(is_causal), Q_RESIDENT=e <= block_k,
                                     UPCAST=query.device.type == "cpu" and query.dtype == torch.bfloat16,
                                     BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=block_k, VALUE_BLOCK=value_block,
                                     num_warps=num_warps, num_stages=num_stages)
    return out, lse
