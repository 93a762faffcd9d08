"""kernelevo's own Triton recurrent layers: ``torch.lstm`` and ``torch.gru`` (nn.LSTM, nn.GRU: any number of layers,
bidirectional, batch_first, with or without biases) as PyTorch computes them in inference.

Per layer and direction, one GEMM computes the input projections of all time steps at once
(``xp[t, b] = x[t, b] @ W_ih^T + b_ih``, ``rnn_input_kernel``), then one launch per time step
(``lstm_step_kernel``, ``gru_step_kernel``) multiplies the previous hidden state by W_hh (one ``tl.dot`` per gate,
accumulating in fp32), adds b_hh and the step's input projection, applies the gate nonlinearities and writes the
new state: the hidden state into the layer's output at that step (where the next step and the next layer read it),
the LSTM's cell state into c_n in place (each program reads and writes only its own elements). Gate order and
formulas are PyTorch's:

* LSTM (gates i, f, g, o): ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``;
* GRU (gates r, z, n): ``n = tanh(x_n + b_in + r * (h @ W_hn^T + b_hn))`` (b_hn inside the product with r),
  ``h' = (1 - z) * n + z * h``.

The backward direction of a bidirectional layer runs its steps from the last to the first; its output is the second
half of the layer's output features, and h_n / c_n are ordered (layer, direction) as PyTorch's. Dropout between
layers is a training-time operation and is not applied (inference, as in eval mode). A step kernel's programs take a
block of batch rows by a block of hidden units; each reads the whole previous hidden state of its rows, so the
time steps are separate launches.

This file is standalone (torch and triton only): ``kernelevo.seeds.inductor.recurrent`` copies it into a seed whose
captured code called kernelevo's recurrent operators (``kernelevo.seeds.inductor.rnn_ops``), where each call becomes
``lstm(...)`` or ``gru(...)`` with its launch parameters as the seed's tunable constants.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rnn_tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))  # never overflows
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def rnn_input_kernel(x_ptr, w_ptr, b_ptr, out_ptr, T, B, K, N, sxt, sxb, sxk, swn, swk,
                     HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    """out[t, b, :] = x[t, b, :] @ w^T + b, rows m = t * B + b, out contiguous (T, B, N)."""
    pid = tl.program_id(0)
    M = T * B
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    rows = (offs_m // B).to(tl.int64) * sxt + (offs_m % B).to(tl.int64) * sxb
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        a = tl.load(x_ptr + rows[:, None] + offs_k[None, :] * sxk, mask=mask_m[:, None] & mask_k[None, :], other=0.0)
        w = tl.load(w_ptr + offs_n[None, :] * swn + offs_k[:, None] * swk, mask=mask_k[:, None] & mask_n[None, :],
                    other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    out = out_ptr + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
    tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


@triton.jit(do_not_specialize=["xp_off", "h_off", "c_off", "out_off", "cn_off"])  # one build for every step
def lstm_step_kernel(xp_ptr, h_ptr, c_ptr, w_ptr, b_ptr, out_ptr, cn_ptr, B, H, xp_off, h_off, sh_b, sh_k, c_off,
                     sc_b, sc_h, swn, swk, out_off, so_b, cn_off, HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr,
                     BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    """One LSTM time step of one direction: gates from xp (T, B, 4H) at offset xp_off and h (rows h_off + b * sh_b),
    c' into cn (contiguous rows of H at cn_off) from c (at c_off), h' into out (rows out_off + b * so_b)."""
    offs_b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_j = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_b = offs_b < B
    mask_j = offs_j < H
    mask = mask_b[:, None] & mask_j[None, :]
    h_rows = h_ptr + h_off + offs_b.to(tl.int64)[:, None] * sh_b
    w_cols = w_ptr + offs_j[None, :] * swn  # gate i's rows of W_hh; f, g, o follow H rows apart each
    gate = H * swn
    acc_i = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    acc_f = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    acc_g = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    acc_o = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):  # h @ W_hh^T, the h tile read once for the four gates
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < H
        h = tl.load(h_rows + offs_k[None, :] * sh_k, mask=mask_b[:, None] & mask_k[None, :], other=0.0)
        w = w_cols + offs_k[:, None] * swk
        mask_w = mask_k[:, None] & mask_j[None, :]
        acc_i = tl.dot(h, tl.load(w, mask=mask_w, other=0.0), acc_i, input_precision="ieee")
        acc_f = tl.dot(h, tl.load(w + gate, mask=mask_w, other=0.0), acc_f, input_precision="ieee")
        acc_g = tl.dot(h, tl.load(w + 2 * gate, mask=mask_w, other=0.0), acc_g, input_precision="ieee")
        acc_o = tl.dot(h, tl.load(w + 3 * gate, mask=mask_w, other=0.0), acc_o, input_precision="ieee")
    xp = xp_ptr + xp_off + offs_b.to(tl.int64)[:, None] * (4 * H) + offs_j[None, :]
    acc_i += tl.load(xp, mask=mask, other=0.0)
    acc_f += tl.load(xp + H, mask=mask, other=0.0)
    acc_g += tl.load(xp + 2 * H, mask=mask, other=0.0)
    acc_o += tl.load(xp + 3 * H, mask=mask, other=0.0)
    if HAS_BIAS:
        bias = b_ptr + offs_j[None, :]
        acc_i += tl.load(bias, mask=mask_j[None, :], other=0.0).to(tl.float32)
        acc_f += tl.load(bias + H, mask=mask_j[None, :], other=0.0).to(tl.float32)
        acc_g += tl.load(bias + 2 * H, mask=mask_j[None, :], other=0.0).to(tl.float32)
        acc_o += tl.load(bias + 3 * H, mask=mask_j[None, :], other=0.0).to(tl.float32)
    c = tl.load(c_ptr + c_off + offs_b.to(tl.int64)[:, None] * sc_b + offs_j[None, :] * sc_h, mask=mask,
                other=0.0).to(tl.float32)
    c = tl.sigmoid(acc_f) * c + tl.sigmoid(acc_i) * rnn_tanh(acc_g)
    h = tl.sigmoid(acc_o) * rnn_tanh(c)
    tl.store(cn_ptr + cn_off + offs_b.to(tl.int64)[:, None] * H + offs_j[None, :],
             c.to(cn_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + out_off + offs_b.to(tl.int64)[:, None] * so_b + offs_j[None, :],
             h.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["xp_off", "h_off", "out_off"])  # one build for every step
def gru_step_kernel(xp_ptr, h_ptr, w_ptr, b_ptr, out_ptr, B, H, xp_off, h_off, sh_b, sh_k, swn, swk, out_off, so_b,
                    HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr):
    """One GRU time step of one direction: gates from xp (T, B, 3H) at offset xp_off and h (rows h_off + b * sh_b),
    h' into out (rows out_off + b * so_b)."""
    offs_b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_j = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask_b = offs_b < B
    mask_j = offs_j < H
    mask = mask_b[:, None] & mask_j[None, :]
    h_rows = h_ptr + h_off + offs_b.to(tl.int64)[:, None] * sh_b
    w_cols = w_ptr + offs_j[None, :] * swn  # gate r's rows of W_hh; z, n follow H rows apart each
    gate = H * swn
    acc_r = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    acc_z = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    acc_n = tl.zeros((BLOCK_B, BLOCK_H), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):  # h @ W_hh^T, the h tile read once for the three gates
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < H
        h = tl.load(h_rows + offs_k[None, :] * sh_k, mask=mask_b[:, None] & mask_k[None, :], other=0.0)
        w = w_cols + offs_k[:, None] * swk
        mask_w = mask_k[:, None] & mask_j[None, :]
        acc_r = tl.dot(h, tl.load(w, mask=mask_w, other=0.0), acc_r, input_precision="ieee")
        acc_z = tl.dot(h, tl.load(w + gate, mask=mask_w, other=0.0), acc_z, input_precision="ieee")
        acc_n = tl.dot(h, tl.load(w + 2 * gate, mask=mask_w, other=0.0), acc_n, input_precision="ieee")
    if HAS_BIAS:  # b_h{r,z,n} (b_hn stays inside r * (...))
        bias = b_ptr + offs_j[None, :]
        acc_r += tl.load(bias, mask=mask_j[None, :], other=0.0).to(tl.float32)
        acc_z += tl.load(bias + H, mask=mask_j[None, :], other=0.0).to(tl.float32)
        acc_n += tl.load(bias + 2 * H, mask=mask_j[None, :], other=0.0).to(tl.float32)
    xp = xp_ptr + xp_off + offs_b.to(tl.int64)[:, None] * (3 * H) + offs_j[None, :]
    r = tl.sigmoid(tl.load(xp, mask=mask, other=0.0) + acc_r)
    z = tl.sigmoid(tl.load(xp + H, mask=mask, other=0.0) + acc_z)
    n = rnn_tanh(tl.load(xp + 2 * H, mask=mask, other=0.0) + r * acc_n)
    h_prev = tl.load(h_rows + offs_j[None, :] * sh_k, mask=mask, other=0.0).to(tl.float32)
    h = (1.0 - z) * n + z * h_prev
    tl.store(out_ptr + out_off + offs_b.to(tl.int64)[:, None] * so_b + offs_j[None, :],
             h.to(out_ptr.dtype.element_ty), mask=mask)


def rnn_layers(gates, x, hx, cx, weights, has_biases, num_layers, bidirectional, batch_first, BLOCK_M=32,
               BLOCK_N=32, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=2, STEP_B=16, STEP_H=32, STEP_K=32,
               STEP_WARPS=4):
    """(output, h_n, c_n) of a multi-layer recurrent network with `gates` gates (4: LSTM, 3: GRU; c_n None) on a
    batched input `x`; `weights` as ``torch.lstm`` / ``torch.gru`` take them (w_ih, w_hh[, b_ih, b_hh] per layer and
    direction, the reverse direction after the forward one)."""
    dirs = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    hidden = hx.shape[2]
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else x.shape[:2]
    h_n = torch.empty((num_layers * dirs, batch, hidden), dtype=x.dtype, device=x.device)
    c_n = torch.empty_like(h_n) if cx is not None else None
    layer_in = x.transpose(0, 1) if batch_first else x  # (T, B, features), a view
    out = layer_in
    common = dict(HAS_BIAS=has_biases, BLOCK_B=STEP_B, BLOCK_H=STEP_H, BLOCK_K=STEP_K, num_warps=STEP_WARPS)
    for layer in range(num_layers):
        out = torch.empty((steps, batch, dirs * hidden), dtype=x.dtype, device=x.device)
        for direction in range(dirs):
            index = layer * dirs + direction
            w_ih, w_hh = weights[index * per], weights[index * per + 1]
            b_ih, b_hh = (weights[index * per + 2], weights[index * per + 3]) if has_biases else (w_ih, w_hh)
            n = gates * hidden
            xp = torch.empty((steps, batch, n), dtype=torch.float32, device=x.device)
            grid = (triton.cdiv(steps * batch, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
            rnn_input_kernel[grid](layer_in, w_ih, b_ih, xp, steps, batch, layer_in.shape[2], n, *layer_in.stride(),
                                   *w_ih.stride(), HAS_BIAS=has_biases, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                   BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=num_warps, num_stages=num_stages)
            step_grid = (triton.cdiv(batch, STEP_B), triton.cdiv(hidden, STEP_H))
            column = direction * hidden * out.stride(2)
            for step in range(steps):
                t = step if direction == 0 else steps - 1 - step
                if step == 0:  # the initial state of this layer and direction
                    h_src, h_off, sh_b, sh_k = hx, index * hx.stride(0), hx.stride(1), hx.stride(2)
                else:  # the previous step's output
                    before = t - 1 if direction == 0 else t + 1
                    h_src, h_off, sh_b, sh_k = out, before * out.stride(0) + column, out.stride(1), out.stride(2)
                if cx is not None:
                    c_src, c_off = (cx, index * cx.stride(0)) if step == 0 else (c_n, index * batch * hidden)
                    lstm_step_kernel[step_grid](xp, h_src, c_src, w_hh, b_hh, out, c_n, batch, hidden,
                                                t * batch * n, h_off, sh_b, sh_k, c_off, *c_src.stride()[1:],
                                                *w_hh.stride(), t * out.stride(0) + column, out.stride(1),
                                                index * batch * hidden, **common)
                else:
                    gru_step_kernel[step_grid](xp, h_src, w_hh, b_hh, out, batch, hidden, t * batch * n, h_off,
                                               sh_b, sh_k, *w_hh.stride(), t * out.stride(0) + column,
                                               out.stride(1), **common)
            final = steps - 1 if direction == 0 else 0
            h_n[index].copy_(out[final, :, direction * hidden:(direction + 1) * hidden])
        layer_in = out
    return (out.transpose(0, 1) if batch_first else out), h_n, c_n  # batch_first: a view, as torch's


def lstm(x, hx, cx, weights, has_biases, num_layers, bidirectional, batch_first, **launch):
    """``torch.lstm(x, (hx, cx), weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first)``:
    (output, h_n, c_n)."""
    return rnn_layers(4, x, hx, cx, weights, has_biases, num_layers, bidirectional, batch_first, **launch)


def gru(x, hx, weights, has_biases, num_layers, bidirectional, batch_first, **launch):
    """``torch.gru(x, hx, weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first)``:
    (output, h_n)."""
    return rnn_layers(3, x, hx, None, weights, has_biases, num_layers, bidirectional, batch_first, **launch)[:2]
