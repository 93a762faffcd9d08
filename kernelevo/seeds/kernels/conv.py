"""kernelevo's own Triton convolution: any ``torch.convolution`` (1D/2D/3D, forward or transposed; stride, padding,
dilation, groups, output_padding, bias) as an implicit GEMM over channels-last data, a direct kernel where a group's
GEMM is too small for ``tl.dot``, and a depthwise kernel for one input channel per group.

**Implicit GEMM** (``conv_nd_kernel``): the output's pixels (batch x depth x height x width, flattened: M) are the
GEMM's rows, the output channels of one group (N) its columns, and the reduction runs **tap by tap, channels
inner**: for each kernel tap of the phase, the group's input channels in blocks of BLOCK_K, no index decoded per
element (a group of fewer than 16 channels flattens taps x channels into the reduction instead: ``FLAT_K``).
``conv_nd`` hands the kernel the weight packed with its input channel innermost (B is K-major, as TF32 tensor cores
read it) and, where its CHANNELS_LAST asks, the input in channels-last layout (every A load BLOCK_K consecutive
floats of a pixel); the copies are made inside the call, their time counted. Products by ``tl.dot``, accumulated in
fp32.

One kernel takes a *phase*: along each spatial dimension, output position o = o0 + q * o_step, kernel offset k = k0 +
t * k_step (t < T taps) and input position i = q * i_step + i0 + t * i_tap, for q < Q outputs. A forward
convolution is one phase (o = q, k = t over the whole window, i = q * stride - padding + k * dilation). A transposed
convolution (output o sums input i at kernel offset k wherever o = i * stride - padding + k * dilation) is split by
output phase (sub-pixel decomposition): the outputs with one residue r = o mod stride per dimension take input from
the same taps, those k with (r + padding - k * dilation) % stride == 0, at input i = q + (r + padding - k *
dilation) / stride; ``conv_phases`` plans one launch per combination of residues, each a dense implicit GEMM over
just its taps. A phase without taps writes the bias (or zeros); output_padding only lengthens the output.

**Depthwise** (``conv_depthwise_kernel``, a forward convolution of one input channel per group, any channel
multiplier): memory-bound, so each program computes a BLOCK_H x BLOCK_W tile of one output plane by multiply-adds
over the window, reading the input's rows where they lie (no layout change); neighbouring taps hit the same cache
lines.

**Direct** (``conv_direct_kernel``: the other phases whose group's GEMM is too small for ``tl.dot``, ``direct_path``):
a tile of output channels (over all groups) x output pixels, accumulated over the group's input channels and the
phase's taps with multiply-adds in fp32.

**Epilogues**: every kernel applies ``conv_nd``'s `epilogue` to its fp32 tile before its one store; with
`epilogue_reduces` the GEMM and direct kernels hand it the tile as (pixels, all the channels) with each row's pixel
number instead, and it stores what it reduces itself (a min or a softmax over the channels); the kernels store nothing.

1D and 2D convolutions run as 3D ones with unit leading spatial dimensions. Programs take the output tiles in groups
of GROUP_M rows (as Triton's GEMM tutorial does) for L2 reuse; axis 1 of the grid is the convolution's group. The
phase's own values are not specialised on (one compiled kernel serves every phase). Addresses are computed in int64
(KernelBench's inputs pass 2**31 elements). Every size is read from the tensors given, so a seed holding this file
runs at any size.

This file is standalone (torch and triton only): ``kernelevo.seeds.inductor.convolutions`` copies it into a seed whose
Inductor code called ``torch.convolution``, where each call becomes ``conv_nd(...)`` with its launch parameters as
the seed's tunable constants.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def output_pixel(offs_m, QD, QH, QW):
    """The (batch, depth, row, column) of a phase's output pixels numbered `offs_m` (row-major), the batch in int64."""
    qw = offs_m % QW
    rest = offs_m // QW
    qh = rest % QH
    rest = rest // QH
    qd = rest % QD
    return (rest // QD).to(tl.int64), qd, qh, qw


@triton.jit
def tap_position(t, TH, TW):
    """The (depth, row, column) within a phase's taps of tap number `t` (row-major)."""
    return t // (TH * TW), (t // TW) % TH, t % TW


@triton.jit
def input_pixel(qd, qh, qw, td, th, tw, D, H, W, sxd, sxh, sxw, id_step, ih_step, iw_step, id0, ih0, iw0,
                id_tap, ih_tap, iw_tap, iw_div):
    """The input element phase output (qd, qh, qw) reads at tap (td, th, tw) (any shapes that broadcast): its offset
    from the pixel's batch and channel, and whether it exists (inside the input; on a gathering row, the stride
    divides its column)."""
    idd = qd * id_step + id0 + td * id_tap
    ih = qh * ih_step + ih0 + th * ih_tap
    iw_at = qw * iw_step + iw0 + tw * iw_tap
    iw = iw_at // iw_div
    valid = (idd >= 0) & (ih >= 0) & (iw >= 0) & (idd < D) & (ih < H) & (iw < W) & (iw * iw_div == iw_at)
    return idd.to(tl.int64) * sxd + ih.to(tl.int64) * sxh + iw.to(tl.int64) * sxw, valid


@triton.jit
def weight_tap(td, th, tw, kd0, kh0, kw0, kd_step, kh_step, kw_step, swd, swh, sww):
    """The offset of the weight's kernel offset at tap (td, th, tw) of a phase."""
    return (kd0 + td * kd_step).to(tl.int64) * swd + (kh0 + th * kh_step).to(tl.int64) * swh \
        + (kw0 + tw * kw_step).to(tl.int64) * sww


@triton.jit(do_not_specialize=["QD", "QH", "QW", "TD", "TH", "TW", "od0", "oh0", "ow0", "id0", "ih0", "iw0",
                               "kd0", "kh0", "kw0"])
def conv_nd_kernel(x_ptr, w_ptr, b_ptr, out_ptr,
                   N, D, H, W, QD, QH, QW, TD, TH, TW, C_in_g, C_out_g, OD, OH, OW,
                   sxn, sxc, sxd, sxh, sxw, sw_ci, sw_co, sw_group, swd, swh, sww, son, soc, sod, soh, sow,
                   od0, oh0, ow0, od_step, oh_step, ow_step, id_step, ih_step, iw_step, id0, ih0, iw0,
                   id_tap, ih_tap, iw_tap, kd0, kh0, kw0, kd_step, kh_step, kw_step, iw_div, ep_args,
                   HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, FLAT_K: tl.constexpr, EPILOGUE: tl.constexpr, REDUCES: tl.constexpr):
    pid = tl.program_id(0)
    group = tl.program_id(1)
    M = N * QD * QH * QW
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(C_out_g, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M
    mask_n = offs_n < C_out_g
    n, qd, qh, qw = output_pixel(offs_m, QD, QH, QW)
    co = group * C_out_g + offs_n  # the output channel, over all groups
    x_pixel = n * sxn + (group * C_in_g).to(tl.int64) * sxc  # the group's first input channel of each row's batch
    w_column = group.to(tl.int64) * sw_group + offs_n.to(tl.int64) * sw_co

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT_K:  # few channels a group: the reduction (taps x channels, channels inner) flattened into tiles of BLOCK_K
        K = TD * TH * TW * C_in_g
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + offs_k
            t = kk // C_in_g
            c = kk - t * C_in_g
            td, th, tw = tap_position(t, TH, TW)
            offset, valid = input_pixel(qd[:, None], qh[:, None], qw[:, None], td[None, :], th[None, :], tw[None, :],
                                        D, H, W, sxd, sxh, sxw, id_step, ih_step, iw_step, id0, ih0, iw0,
                                        id_tap, ih_tap, iw_tap, iw_div)
            a = tl.load(x_ptr + x_pixel[:, None] + offset + c[None, :].to(tl.int64) * sxc,
                        mask=valid & mask_m[:, None] & (kk < K)[None, :], other=0.0)
            tap = weight_tap(td, th, tw, kd0, kh0, kw0, kd_step, kh_step, kw_step, swd, swh, sww) \
                + c.to(tl.int64) * sw_ci
            b = tl.load(w_ptr + tap[:, None] + w_column[None, :], mask=(kk < K)[:, None] & mask_n[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
    else:
        chunks = tl.cdiv(C_in_g, BLOCK_K)
        for step in range(0, TD * TH * TW * chunks):  # taps outer, the group's input channels inner
            t = step // chunks
            c = (step - t * chunks) * BLOCK_K + offs_k
            td, th, tw = tap_position(t, TH, TW)
            offset, valid = input_pixel(qd, qh, qw, td, th, tw, D, H, W, sxd, sxh, sxw, id_step, ih_step, iw_step,
                                        id0, ih0, iw0, id_tap, ih_tap, iw_tap, iw_div)
            mask_c = c < C_in_g
            a = tl.load(x_ptr + (x_pixel + offset)[:, None] + c[None, :].to(tl.int64) * sxc,
                        mask=(valid & mask_m)[:, None] & mask_c[None, :], other=0.0)
            tap = weight_tap(td, th, tw, kd0, kh0, kw0, kd_step, kh_step, kw_step, swd, swh, sww)
            b = tl.load(w_ptr + tap + c[:, None].to(tl.int64) * sw_ci + w_column[None, :],
                        mask=mask_c[:, None] & mask_n[None, :], other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=mask_n, other=0.0).to(tl.float32)[None, :]
    od = od0 + qd * od_step
    oh = oh0 + qh * oh_step
    ow = ow0 + qw * ow_step
    out_offsets = n[:, None] * son + co[None, :].to(tl.int64) * soc + od[:, None].to(tl.int64) * sod \
        + oh[:, None].to(tl.int64) * soh + ow[:, None].to(tl.int64) * sow
    out_mask = mask_m[:, None] & mask_n[None, :]
    if REDUCES:  # the tile holds every channel of its pixels: the epilogue reduces over them and stores its outputs
        pixel = ((n * OD + od) * OH + oh) * OW + ow
        EPILOGUE(acc, pixel[:, None], co[None, :], mask_m[:, None], mask_n[None, :], out_ptr, ep_args, BLOCK_M,
                 BLOCK_N)
    else:
        if EPILOGUE is not None:
            acc = EPILOGUE(acc, out_offsets, out_mask, ep_args)
        tl.store(out_ptr + out_offsets, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit(do_not_specialize=["D", "H", "W", "OD", "OH", "OW", "KD", "KH", "KW", "pd", "ph", "pw"])
def conv_depthwise_kernel(x_ptr, w_ptr, b_ptr, out_ptr, C_out, multiplier, D, H, W, OD, OH, OW, KD, KH, KW,
                          sxn, sxc, sxd, sxh, sxw, swc, swd, swh, sww, son, soc, sod, soh, sow,
                          sd, sh, sw, pd, ph, pw, dd, dh, dw, ep_args,
                          HAS_BIAS: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr,
                          EPILOGUE: tl.constexpr):
    """A BLOCK_H x BLOCK_W tile of output plane (batch, channel, depth) = program 0 of a forward convolution with
    one input channel per group (output channel co reads input channel co // multiplier)."""
    plane = tl.program_id(0)
    od = plane % OD
    co = (plane // OD) % C_out
    n = (plane // OD // C_out).to(tl.int64)
    oh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = tl.program_id(2) * BLOCK_W + tl.arange(0, BLOCK_W)
    out_ok = (oh < OH)[:, None] & (ow < OW)[None, :]
    x_plane = x_ptr + n * sxn + (co // multiplier).to(tl.int64) * sxc
    w_plane = w_ptr + co.to(tl.int64) * swc
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32)
    for kd in range(0, KD):
        idd = od * sd - pd + kd * dd + tl.zeros((BLOCK_H,), tl.int32)  # a row's (interpreter: scalar & vector)
        for kh in range(0, KH):
            ih = oh * sh - ph + kh * dh
            row_ok = out_ok & ((ih >= 0) & (ih < H) & (idd >= 0) & (idd < D))[:, None]
            row = x_plane + (idd.to(tl.int64) * sxd + ih.to(tl.int64) * sxh)[:, None]
            for kw in range(0, KW):
                iw = ow * sw - pw + kw * dw
                ok = row_ok & ((iw >= 0) & (iw < W))[None, :]
                weight = tl.load(w_plane + kd * swd + kh * swh + kw * sww).to(tl.float32)
                acc += tl.load(row + iw.to(tl.int64)[None, :] * sxw, mask=ok, other=0.0).to(tl.float32) * weight
    if HAS_BIAS:
        acc += tl.load(b_ptr + co).to(tl.float32)
    out_offsets = n * son + co.to(tl.int64) * soc + od.to(tl.int64) * sod + oh.to(tl.int64)[:, None] * soh \
        + ow.to(tl.int64)[None, :] * sow
    if EPILOGUE is not None:
        acc = EPILOGUE(acc, out_offsets, out_ok, ep_args)
    tl.store(out_ptr + out_offsets, acc.to(out_ptr.dtype.element_ty), mask=out_ok)


@triton.jit(do_not_specialize=["QD", "QH", "QW", "TD", "TH", "TW", "od0", "oh0", "ow0", "id0", "ih0", "iw0",
                               "kd0", "kh0", "kw0"])
def conv_direct_kernel(x_ptr, w_ptr, b_ptr, out_ptr,
                       N, D, H, W, QD, QH, QW, TD, TH, TW, C_in_g, C_out_g, C_out, OD, OH, OW,
                       sxn, sxc, sxd, sxh, sxw, sw_ci, sw_co, sw_group, swd, swh, sww, son, soc, sod, soh, sow,
                       od0, oh0, ow0, od_step, oh_step, ow_step, id_step, ih_step, iw_step, id0, ih0, iw0,
                       id_tap, ih_tap, iw_tap, kd0, kh0, kw0, kd_step, kh_step, kw_step, iw_div, ep_args,
                       HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       EPILOGUE: tl.constexpr, REDUCES: tl.constexpr):
    """One phase of a convolution whose groups' GEMMs are too small for tl.dot: a (BLOCK_N channels, BLOCK_M
    pixels) tile of the output, the sum over the group's input channels and the phase's taps by multiply-adds."""
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    co = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # the output channel, over all groups
    mask_m = offs_m < N * QD * QH * QW
    mask_n = co < C_out
    n, qd, qh, qw = output_pixel(offs_m, QD, QH, QW)
    group = co // C_out_g
    x_channel = (group * C_in_g).to(tl.int64) * sxc  # the group's first input channel
    w_channel = group.to(tl.int64) * sw_group + (co - group * C_out_g).to(tl.int64) * sw_co
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for ci in range(0, C_in_g):
        for td in range(0, TD):
            idd = qd * id_step + id0 + td * id_tap
            ok_d = mask_m & (idd >= 0) & (idd < D)
            for th in range(0, TH):
                ih = qh * ih_step + ih0 + th * ih_tap
                ok_h = ok_d & (ih >= 0) & (ih < H)
                for tw in range(0, TW):
                    iw_at = qw * iw_step + iw0 + tw * iw_tap
                    iw = iw_at // iw_div
                    valid = ok_h & (iw >= 0) & (iw < W) & (iw * iw_div == iw_at)
                    pixel = n * sxn + idd.to(tl.int64) * sxd + ih.to(tl.int64) * sxh + iw.to(tl.int64) * sxw
                    a = tl.load(x_ptr + (x_channel + ci * sxc)[:, None] + pixel[None, :],
                                mask=mask_n[:, None] & valid[None, :], other=0.0)
                    w_offsets = w_channel + ci * sw_ci + (kd0 + td * kd_step) * swd + (kh0 + th * kh_step) * swh \
                        + (kw0 + tw * kw_step) * sww
                    b = tl.load(w_ptr + w_offsets, mask=mask_n, other=0.0)
                    acc += a.to(tl.float32) * b.to(tl.float32)[:, None]
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=mask_n, other=0.0).to(tl.float32)[:, None]
    od = od0 + qd * od_step
    oh = oh0 + qh * oh_step
    ow = ow0 + qw * ow_step
    if REDUCES:  # as conv_nd_kernel's, on the tile transposed: (pixels, channels)
        pixel = ((n * OD + od) * OH + oh) * OW + ow
        EPILOGUE(tl.trans(acc), pixel[:, None], co[None, :], mask_m[:, None], mask_n[None, :], out_ptr, ep_args,
                 BLOCK_M, BLOCK_N)
    else:
        out_offsets = co[:, None].to(tl.int64) * soc + (n * son + od.to(tl.int64) * sod + oh.to(tl.int64) * soh
                                                        + ow.to(tl.int64) * sow)[None, :]
        out_mask = mask_n[:, None] & mask_m[None, :]
        if EPILOGUE is not None:
            acc = EPILOGUE(acc, out_offsets, out_mask, ep_args)
        tl.store(out_ptr + out_offsets, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


def direct_path(c_in_g, c_out_g, taps, groups):
    """Whether a phase runs as ``conv_direct_kernel``: its groups' GEMMs are too small for tl.dot (tiles of at least
    16): the reduction (the group's input channels x the phase's taps) under 16, or a grouped convolution's output
    channels per group under 16 (a convolution of one group keeps the GEMM, whose input tile serves every channel)."""
    return c_in_g * taps < 16 or (groups > 1 and c_out_g < 16)


def axis_phases(size_out, kernel, stride, padding, dilation, transposed, gather=False):
    """One spatial dimension's phases, each ``(o0, o_step, Q, i_step, i0, i_tap, k0, k_step, T, div)``: output o = o0
    + q * o_step (q < Q), kernel offset k = k0 + t * k_step (t < T) and input i = (q * i_step + i0 + t * i_tap) / div
    where that divides (div 1: always). Forward: one phase over the whole window. Transposed: one phase per residue r
    of the output modulo the stride, its taps the offsets k with (r + padding - k * dilation) % stride == 0 (none: T =
    0); with `gather`, one phase over every output and the whole window, each (output, tap) pair taken where the
    stride divides o + padding - k * dilation (the stride's share of the pairs: more multiply-adds, but a program's
    outputs neighbours in memory)."""
    if not transposed:
        return [(0, 1, size_out, stride, -padding, dilation, 0, 1, kernel, 1)]
    if gather and stride > 1:
        return [(0, 1, size_out, 1, padding, -dilation, 0, 1, kernel, stride)]
    k_step = next(j for j in range(1, stride + 1) if j * dilation % stride == 0)  # stride / gcd(stride, dilation)
    phases = []
    for r in range(min(stride, size_out)):
        first = [k for k in range(min(k_step, kernel)) if (r + padding - k * dilation) % stride == 0]
        k0 = first[0] if first else 0
        phases.append((r, stride, -(-(size_out - r) // stride), 1, (r + padding - k0 * dilation) // stride,
                       -(k_step * dilation // stride), k0, k_step, len(range(k0, kernel, k_step)) if first else 0, 1))
    return phases


def conv_phases(sizes, kernel, stride, padding, dilation, transposed, gather_w=False):
    """The launches of a 3D convolution (1D and 2D as 3D): one per combination of its dimensions' phases
    (``axis_phases``), each the tuple of the three dimensions' phases; with `gather_w`, the innermost dimension's as
    one gathering phase."""
    per_axis = [axis_phases(*a, transposed, gather=gather_w and axis == 2)
                for axis, a in enumerate(zip(sizes, kernel, stride, padding, dilation))]
    return [(d, h, w) for d in per_axis[0] for h in per_axis[1] for w in per_axis[2]]


def channels_inner(t, first: int):
    """`t` (5D) with the same sizes, its dimension `first` made the innermost in memory (a copy where it is not): the
    input's channels (``first=1``), or a weight's input channels."""
    if t.stride(first) == 1:
        return t
    order = [d for d in range(5) if d != first] + [first]
    return t.permute(*order).contiguous().permute(*[order.index(d) for d in range(5)])


def depthwise_path(c_in_g, transposed):
    """Whether a convolution runs as ``conv_depthwise_kernel``: a forward one of one input channel per group."""
    return c_in_g == 1 and not transposed


def conv_nd(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out_stride=None,
            BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=3, CHANNELS_LAST=0, W_PHASES=1,
            direct=None, out_dtype=None, epilogue=None, epilogue_args=(), epilogue_reduces=False):
    """``torch.convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)``: one
    launch of ``conv_depthwise_kernel`` for a depthwise convolution (``depthwise_path``), else one launch per phase
    of ``conv_phases``, of ``conv_direct_kernel`` where ``direct_path`` says so and of ``conv_nd_kernel`` (over the
    weight with its input channels innermost) otherwise (`direct`: True or False, every phase one way). The output
    has strides `out_stride` where given (the layout Inductor's code expects of the library call's output), else
    torch's contiguous layout. W_PHASES=0: a strided transposed convolution's innermost dimension is not split by
    output phase but gathered (``axis_phases``): no launch writes every stride-th element of a row. The depthwise
    kernel's tile is BLOCK_N / 16 output rows by 2 * BLOCK_M columns (at least one row; both capped at the output's).
    CHANNELS_LAST=1: the implicit GEMM reads a channels-last copy of the input (each A load BLOCK_K consecutive
    floats of a pixel); 0: the input as it is (no copy). `epilogue`: a jit function ``(acc, offsets, mask, args)`` every
    kernel applies to its fp32 tile before its one store (`offsets`: the tile's elements' offsets in the output,
    `mask`: those that exist, `args`: `epilogue_args`), so elementwise work after the convolution costs no pass of its
    own (``kernelevo.seeds.inductor.epilogues``); the output is of dtype `out_dtype` where given (else the input's).
    `epilogue_reduces`: the epilogue is a reduction over each pixel's channels, ``(acc, pixel, channel, pixel_mask,
    channel_mask, out_ptr, args, XBLOCK, R0_BLOCK)`` on the tile as (pixels, channels) (`pixel`: each row's number in
    the output's (batch, depth, row, column) order, `channel`: each column's output channel, `out_ptr`: the output,
    `XBLOCK` and `R0_BLOCK`: the tile's sizes), that stores what it computes itself: no kernel stores the tile, and
    every tile holds all the channels (BLOCK_N their next power of two, at least 16, whatever was asked; no depthwise
    kernel, and a grouped convolution takes the direct one) (``kernelevo.seeds.inductor.reductions``)."""
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
    dtype = x.dtype if out_dtype is None else out_dtype
    out = torch.empty_strided(shape, out_stride, dtype=dtype, device=x.device) if out_stride is not None \
        else torch.empty(shape, dtype=dtype, device=x.device)
    out5 = out[(slice(None), slice(None)) + (None,) * lead]
    c_in_g, c_out_g = c_in // groups, c_out // groups
    b = x5 if bias is None else bias
    reduces = bool(epilogue_reduces)
    if reduces:  # every tile all the channels: no channel tiles, no per-channel or per-group programs
        BLOCK_N = max(16, triton.next_power_of_2(c_out))  # tl.dot's least (the direct kernel's: the channels')
        direct = True if groups > 1 else direct
    if direct is not False and not reduces and depthwise_path(c_in_g, transposed):
        rows = min(max(BLOCK_N // 16, 1), triton.next_power_of_2(sizes[1]))
        columns = min(2 * BLOCK_M, triton.next_power_of_2(sizes[2]))
        grid = (batch * c_out * sizes[0], triton.cdiv(sizes[1], rows), triton.cdiv(sizes[2], columns))
        conv_depthwise_kernel[grid](x5, w5, b, out5, c_out, c_out_g, *x5.shape[2:], *sizes, *kernel, *x5.stride(),
                                    w5.stride(0), *w5.stride()[2:], *out5.stride(), *stride, *padding, *dilation,
                                    tuple(epilogue_args), HAS_BIAS=bias is not None, BLOCK_H=rows, BLOCK_W=columns,
                                    EPILOGUE=epilogue, num_warps=num_warps, num_stages=num_stages)
        return out
    packed = {}  # the GEMM's operands, copied once for every phase that needs them

    def operands():
        if not packed:  # the weight's input channels: dimension 0 of a transposed one's, else 1
            packed.update(x=channels_inner(x5, 1) if CHANNELS_LAST else x5,
                          w=channels_inner(w5, 0 if transposed else 1))
        return packed["x"], packed["w"]

    for phase in conv_phases(sizes, kernel, stride, padding, dilation, transposed, gather_w=not W_PHASES):
        o0, o_step, q, i_step, i0, i_tap, k0, k_step, t, div = zip(*phase)
        pixels = batch * q[0] * q[1] * q[2]
        gemm = not (direct_path(c_in_g, c_out_g, t[0] * t[1] * t[2], groups) if direct is None else direct)
        xs, ws = operands() if gemm else (x5, w5)
        sw0, sw1 = ws.stride()[:2]  # weight (C_in, C_out / groups, ...) transposed, else (C_out, C_in / groups, ...)
        w_channels = (sw0, sw1, c_in_g * sw0) if transposed else (sw1, sw0, c_out_g * sw0)  # input, output, group
        shared = (*xs.stride(), *w_channels, *ws.stride()[2:], *out5.stride(), *o0, *o_step, *i_step, *i0, *i_tap,
                  *k0, *k_step, div[2])
        if not gemm:
            block_n = min(BLOCK_N, triton.next_power_of_2(c_out))  # no tile wider than the channels
            grid = (triton.cdiv(pixels, BLOCK_M), triton.cdiv(c_out, block_n))
            conv_direct_kernel[grid](xs, ws, b, out5, batch, *xs.shape[2:], *q, *t, c_in_g, c_out_g, c_out, *sizes,
                                     *shared, tuple(epilogue_args), HAS_BIAS=bias is not None, BLOCK_M=BLOCK_M,
                                     BLOCK_N=block_n, EPILOGUE=epilogue, REDUCES=reduces, num_warps=num_warps,
                                     num_stages=num_stages)
            continue
        flat = c_in_g < min(BLOCK_K, 16)  # a chunk of the channels would be mostly masked: flatten taps x channels
        block_k = BLOCK_K if flat else min(BLOCK_K, max(16, triton.next_power_of_2(c_in_g)))
        grid = (triton.cdiv(pixels, BLOCK_M) * triton.cdiv(c_out_g, BLOCK_N), groups)
        conv_nd_kernel[grid](xs, ws, b, out5, batch, *xs.shape[2:], *q, *t, c_in_g, c_out_g, *sizes, *shared,
                             tuple(epilogue_args), HAS_BIAS=bias is not None, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                             BLOCK_K=block_k, GROUP_M=GROUP_M, FLAT_K=flat, EPILOGUE=epilogue, REDUCES=reduces,
                             num_warps=num_warps, num_stages=num_stages)
    return out
