"""kernelevo's own Triton convolution: any ``torch.convolution`` (1D/2D/3D, forward or transposed; stride, padding,
dilation, groups, output_padding, bias) as one implicit GEMM.

The output's pixels (batch x depth x height x width, flattened: M) are the GEMM's rows, the output channels of one
group (N) its columns, and the reduction (K) runs over the group's input channels x the kernel window, flattened, in
tiles of BLOCK_K: each tile gathers its input pixels (A: BLOCK_M x BLOCK_K) and weights (B: BLOCK_K x BLOCK_N) and
multiplies them with ``tl.dot``, accumulating in fp32. A transposed convolution is written in its gather form: output
position o sums input i at kernel offset k wherever ``o = i * stride - padding + k * dilation`` (so i = (o + padding -
k * dilation) / stride where that divides exactly and lies inside the input); its output_padding only lengthens the
output. 1D and 2D convolutions run as 3D ones with unit leading spatial dimensions. Programs take the output tiles
in groups of GROUP_M rows (as Triton's GEMM tutorial does) for L2 reuse; axis 1 of the grid is the convolution's
group. Addresses are computed in int64 (KernelBench's inputs pass 2**31 elements).

This file is standalone (torch and triton only): ``seeds.inductor.convolutions`` copies it into a seed whose
Inductor code called ``torch.convolution``, where each call becomes ``conv_nd(...)`` with its launch parameters as
the seed's tunable constants.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def conv_nd_kernel(x_ptr, w_ptr, b_ptr, out_ptr,
                   N, D, H, W, OD, OH, OW, KD, KH, KW, C_in_g, C_out_g,
                   sxn, sxc, sxd, sxh, sxw, sw0, sw1, swd, swh, sww, son, soc, sod, soh, sow,
                   stride_d, stride_h, stride_w, pad_d, pad_h, pad_w, dil_d, dil_h, dil_w,
                   TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    group = tl.program_id(1)
    M = N * OD * OH * OW
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(C_out_g, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < C_out_g
    ow = offs_m % OW
    rest = offs_m // OW
    oh = rest % OH
    rest = rest // OH
    od = rest % OD
    n = (rest // OD).to(tl.int64)
    co = group * C_out_g + offs_n  # the output channel, over all groups

    window = KD * KH * KW
    K = C_in_g * window
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        ci = group * C_in_g + offs_k // window  # the input channel, over all groups
        r = offs_k % window
        kd = r // (KH * KW)
        kh = (r // KW) % KH
        kw = r % KW
        if TRANSPOSED:
            td = od[:, None] + pad_d - kd[None, :] * dil_d
            th = oh[:, None] + pad_h - kh[None, :] * dil_h
            tw = ow[:, None] + pad_w - kw[None, :] * dil_w
            idd = td // stride_d
            ih = th // stride_h
            iw = tw // stride_w
            valid = (td >= 0) & (th >= 0) & (tw >= 0) & (td % stride_d == 0) & (th % stride_h == 0) \
                & (tw % stride_w == 0) & (idd < D) & (ih < H) & (iw < W)
        else:
            idd = od[:, None] * stride_d - pad_d + kd[None, :] * dil_d
            ih = oh[:, None] * stride_h - pad_h + kh[None, :] * dil_h
            iw = ow[:, None] * stride_w - pad_w + kw[None, :] * dil_w
            valid = (idd >= 0) & (ih >= 0) & (iw >= 0) & (idd < D) & (ih < H) & (iw < W)
        x_offsets = n[:, None] * sxn + ci[None, :].to(tl.int64) * sxc + idd.to(tl.int64) * sxd \
            + ih.to(tl.int64) * sxh + iw.to(tl.int64) * sxw
        a = tl.load(x_ptr + x_offsets, mask=mask_m[:, None] & mask_k[None, :] & valid, other=0.0)
        if TRANSPOSED:  # weight (C_in, C_out / groups, kd, kh, kw)
            w_offsets = ci[:, None] * sw0 + offs_n[None, :] * sw1
        else:  # weight (C_out, C_in / groups, kd, kh, kw)
            w_offsets = co[None, :] * sw0 + (offs_k // window)[:, None] * sw1
        w_offsets += kd[:, None] * swd + kh[:, None] * swh + kw[:, None] * sww
        b = tl.load(w_ptr + w_offsets, mask=mask_k[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    out_offsets = n[:, None] * son + co[None, :].to(tl.int64) * soc + od[:, None].to(tl.int64) * sod \
        + oh[:, None].to(tl.int64) * soh + ow[:, None].to(tl.int64) * sow
    tl.store(out_ptr + out_offsets, acc.to(out_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


def conv_nd(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out_stride=None,
            BLOCK_M=64, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=2):
    """``torch.convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)`` by
    ``conv_nd_kernel``; the output has strides `out_stride` where given (the layout Inductor's code expects of the
    library call's output), else torch's contiguous layout."""
    dims = x.dim() - 2
    lead = 3 - dims  # 1D and 2D as 3D: unit leading spatial dimensions
    stride, dilation = ([1] * lead + list(v) for v in (stride, dilation))
    padding, output_padding = ([0] * lead + list(v) for v in (padding, output_padding))
    x5 = x[(slice(None), slice(None)) + (None,) * lead]
    w5 = weight[(slice(None), slice(None)) + (None,) * lead]
    batch, c_in = x5.shape[:2]
    kernel = w5.shape[2:]
    c_out = w5.shape[1] * groups if transposed else w5.shape[0]
    if transposed:
        sizes = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                 zip(x5.shape[2:], stride, padding, dilation, kernel, output_padding)]
    else:
        sizes = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in
                 zip(x5.shape[2:], stride, padding, dilation, kernel)]
    shape = [batch, c_out, *sizes[lead:]]
    out = torch.empty_strided(shape, out_stride, dtype=x.dtype, device=x.device) if out_stride is not None \
        else torch.empty(shape, dtype=x.dtype, device=x.device)
    out5 = out[(slice(None), slice(None)) + (None,) * lead]
    c_out_g = c_out // groups
    grid = (triton.cdiv(batch * sizes[0] * sizes[1] * sizes[2], BLOCK_M) * triton.cdiv(c_out_g, BLOCK_N), groups)
    conv_nd_kernel[grid](x5, w5, x5 if bias is None else bias, out5, batch, *x5.shape[2:], *sizes, *kernel,
                         c_in // groups, c_out_g, *x5.stride(), *w5.stride(), *out5.stride(), *stride, *padding,
                         *dilation, TRANSPOSED=bool(transposed), HAS_BIAS=bias is not None, BLOCK_M=BLOCK_M,
                         BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=num_warps,
                         num_stages=num_stages)
    return out
