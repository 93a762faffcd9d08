"""What the capture changes so that Inductor writes Triton where it would call an ATen operator directly: this module
owns the capture's extra decompositions and the switches it sets while it traces (``capture.py`` takes both).

* **Average pooling with a large window** (``aten.avg_pool2d`` / ``avg_pool3d``, and ``avg_pool1d``, which Inductor's
  own table turns into ``avg_pool2d``): Inductor lowers it as a reduction except where the window has more than
  ``INDUCTOR_MAX_UNROLLED`` elements and differs from the stride (``_avg_poolnd`` in torch/_inductor/lowering.py),
  where it calls ATen's kernel (KernelBench level1/46: a 3x3x3 window at stride 2). There ``avg_pool`` sums the
  window's strided slices of the zero-padded input, which Inductor fuses into one pointwise kernel, and divides by
  ATen's divisor (``count_include_pad``, ``ceil_mode``, ``divisor_override`` as ATen's CPU and CUDA kernels count
  it). Elsewhere it leaves the operator to Inductor's own lowering (the seeds stay what they were). Max pooling needs
  nothing: Inductor lowers every window as a reduction (its decomposition declines large windows, its lowering
  takes them), and ``adaptive_avg_pool`` to one element is a mean.
* **nn.MultiheadAttention's, nn.TransformerEncoderLayer's and nn.TransformerEncoder's fast path** (``slow_paths``):
  in eval() under no_grad they call one fused ATen operator (``aten._transformer_encoder_layer_fwd``: KernelBench
  level3/32; ``aten._native_multi_head_attention``; a nested tensor from a padding mask) unless
  ``torch.backends.mha`` has the fast path off, as it has while the capture traces: Inductor then sees the layers'
  own linear, attention and layer-norm operators.
* **Split outer reductions**, for a variant only (``decompositions: {split_outer_reductions: PARTS}`` in its options,
  ``conf/inductor/variants.yaml``): a sum or mean over one dimension that is not the innermost, over at least
  ``MIN_PART`` elements per part, as partial sums over PARTS parts of that dimension (zero-padded to a multiple of
  PARTS, which Inductor folds into its loads), then their sum. Inductor splits a reduction itself only where its
  output is small (under 64 per SM: ``Reduction.num_splits``), and nothing the search changes later makes the second
  kernel, so the split is this variant's to offer (docs/measurements.md).
* **Split-K matmuls**, with Inductor's GEMM templates (``template_choices.TEMPLATE_DECOMPOSITIONS``: policy triton on
  a GPU): a matrix product whose K is at least ``SPLIT_K_RATIO`` times M and N (KernelBench level1/6: 256 x 256 over
  K = 524,288) gives a whole-K template only M/128 x N/128 programs, a few SMs busy for the whole reduction. ``split_k``
  makes it a batched product over K's parts, each part's (M, N) partial product a program of its own, then their sum:
  Inductor's own "decompose_k" choice, whose batched product is a library call (``bmm_dtype``) where this one is a
  template. Its parts: K's power-of-two divisor that gives every SM ``waves`` tiles, each part at least
  ``SPLIT_K_MIN_PART`` long.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math

INDUCTOR_MAX_UNROLLED = 25  # Inductor's avg_pool lowering falls back above this window size (kernel != stride)
OWN = "decompositions"  # the key of a variant's options that is the capture's, not Inductor's (capture_decompositions)
MIN_PART = 256  # a split outer reduction's least elements per part: a reduction short enough stays in one pass
SPLIT_K_RATIO = 32  # a matmul is split over K where K >= this x max(M, N) (Inductor's decompose_k_threshold)
SPLIT_K_MIN_PART = 1024  # a split matmul's least K per part
SPLIT_K_TILE = 128  # the output tile the parts are counted for (the GEMM templates' usual BLOCK_M, BLOCK_N)


def own_options(options: dict) -> tuple[dict, dict]:
    """A variant's options as (Inductor's, the capture's own ``decompositions``: capture_decompositions' arguments)."""
    return {k: v for k, v in options.items() if k != OWN}, dict(options.get(OWN) or {})


def capture_decompositions(split_outer_reductions: int | None = None, split_k_waves: int | None = None) -> dict:
    """Inductor's decomposition table with the capture's own added: for ``compile_fx(..., decompositions=...)``.
    `split_outer_reductions`: outer sums and means split over that many parts (``split_sum``); `split_k_waves`:
    matmuls with a long K split over parts that give each SM that many tiles (``split_k``)."""
    import torch
    from torch._inductor.decomposition import select_decomp_table

    aten = torch.ops.aten
    table = dict(select_decomp_table())
    for op, dims in ((aten.avg_pool2d.default, 2), (aten.avg_pool3d.default, 3)):
        table[op] = functools.partial(avg_pool, dims=dims, inductors=table.get(op))
    if split_outer_reductions:
        for op, mean in ((aten.sum.dim_IntList, False), (aten.mean.dim, True)):
            table[op] = functools.partial(split_sum, parts=int(split_outer_reductions), mean=mean)
    if split_k_waves:
        table[aten.mm.default] = functools.partial(split_k, waves=int(split_k_waves),
                                                   inductors=table.get(aten.mm.default))
    return table


_splitting = [False]  # set while split_sum traces its own sums, which it leaves to Inductor


def _hint(size) -> int | None:
    """A size's value, or a symbolic size's hint (the example's; no guard is added); None where it has none."""
    return size if isinstance(size, int) else getattr(size.node, "hint", None)


def split_sum(x, dim=None, keepdim=False, dtype=None, *, parts: int, mean: bool = False):
    """``aten.sum.dim_IntList`` (``mean``: ``aten.mean.dim``) of a floating tensor over one dimension that is not its
    innermost (stride not 1) and has at least `parts` x MIN_PART elements: the dimension zero-padded to a multiple of
    `parts` and split into `parts` rows, their partial sums (fp32 for a 16-bit input), then their sum (over the true
    length, for a mean), in the output's dtype. The result is the same for any size of the dimension (the padding
    adds zeros), so a seed made at one size runs at others. Elsewhere ``NotImplemented``: Inductor's own lowering."""
    import torch

    dims = [dim] if isinstance(dim, int) else list(dim or [])
    if _splitting[0] or len(dims) != 1 or not x.dtype.is_floating_point or x.dim() < 2:
        return NotImplemented
    d = dims[0] % x.dim()
    length, stride = _hint(x.shape[d]), _hint(x.stride(d))
    if length is None or stride in (None, 1) or length < parts * MIN_PART:
        return NotImplemented
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    size = x.shape[d]
    per = (size + parts - 1) // parts
    padded = x if isinstance(size, int) and size % parts == 0 else \
        torch.constant_pad_nd(x, [0, 0] * (x.dim() - d - 1) + [0, parts * per - size])
    _splitting[0] = True
    try:
        total = padded.unflatten(d, (parts, per)).sum(d + 1, dtype=acc).sum(d, keepdim=keepdim)
    finally:
        _splitting[0] = False
    return (total / size if mean else total).to(dtype or x.dtype)


def split_k_parts(m: int, n: int, k: int, programs: int) -> int:
    """How many parts ``split_k`` splits K into: doubled while the (M, N) tiles times the parts are fewer than
    `programs` and K stays divisible with parts of at least SPLIT_K_MIN_PART; 1 where K is not long against M and N."""
    if k < SPLIT_K_RATIO * max(m, n):
        return 1
    tiles, parts = math.ceil(m / SPLIT_K_TILE) * math.ceil(n / SPLIT_K_TILE), 1
    while tiles * parts < programs and k % (2 * parts) == 0 and k // (2 * parts) >= SPLIT_K_MIN_PART:
        parts *= 2
    return parts


def split_k(a, b, out_dtype=None, *, waves: int, inductors=None):
    """``aten.mm`` of an (M, K) and a (K, N) floating matrix with static sizes as ``split_k_parts`` parts of K: a
    batched product of (parts, M, K/parts) and (parts, K/parts, N) views (no copy), summed over the parts in fp32 for
    16-bit inputs; elsewhere Inductor's own handling."""
    import torch

    def own():
        if inductors is None:
            return NotImplemented
        return inductors(a, b) if out_dtype is None else inductors(a, b, out_dtype)

    sizes = [s if isinstance(s, int) else None for s in (*a.shape, b.shape[-1])]
    if _splitting[0] or out_dtype is not None or a.dim() != 2 or b.dim() != 2 or None in sizes \
            or not a.dtype.is_floating_point:
        return own()
    m, k, n = sizes
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.device.type == "cuda" else 1
    parts = split_k_parts(m, n, k, waves * sms)
    if parts == 1:
        return own()
    acc = torch.float32 if a.dtype in (torch.float16, torch.bfloat16) else a.dtype
    _splitting[0] = True
    try:
        partial = torch.bmm(a.reshape(m, parts, k // parts).permute(1, 0, 2), b.reshape(parts, k // parts, n))
        return partial.sum(0, dtype=acc).to(a.dtype)
    finally:
        _splitting[0] = False


@contextlib.contextmanager
def slow_paths():
    """The transformer modules' fast path off (restored after): their own ops, not one fused ATen operator, in the
    graph Inductor compiles."""
    import torch

    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _listed(value, dims: int) -> list:
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * dims if len(value) == 1 else value


def avg_pool(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None,
             *, dims: int, inductors=None):
    """ATen's ``avg_pool{dims}d`` as a sum of the window's strided slices over a divisor, where Inductor would call
    ATen's kernel; elsewhere Inductor's own handling (``NotImplemented``, or the table's entry it replaced)."""
    import torch
    from torch._meta_registrations import pooling_output_shape

    kernel = _listed(kernel_size, dims)
    strides = _listed(stride, dims) if stride else kernel
    pads = _listed(padding, dims)
    if math.prod(kernel) <= INDUCTOR_MAX_UNROLLED or kernel == strides:  # Inductor writes Triton for these itself
        if inductors is not None:
            return inductors(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return NotImplemented
    sizes = list(x.shape[-dims:])
    outs = [pooling_output_shape(n, k, p, s, 1, ceil_mode) for n, k, p, s in zip(sizes, kernel, pads, strides)]
    # zero padding: p before, and after as far as the last window reaches (past p only in ceil_mode)
    after = [max(p, (o - 1) * s + k - n - p) for n, k, p, s, o in zip(sizes, kernel, pads, strides, outs)]
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype  # ATen's accumulate type
    padded = torch.constant_pad_nd(x.to(compute), [v for p, a in zip(reversed(pads), reversed(after)) for v in (p, a)])
    total = None
    for offsets in itertools.product(*(range(k) for k in kernel)):  # ATen's order: the first dimension outermost
        window = [slice(f, f + (o - 1) * s + 1, s) for f, o, s in zip(offsets, outs, strides)]
        piece = padded[(Ellipsis, *window)]
        total = piece if total is None else total + piece
    if divisor_override is not None:
        return (total / divisor_override).to(x.dtype)
    if count_include_pad and not ceil_mode:  # every window spans its k elements of the padded input
        return (total / math.prod(kernel)).to(x.dtype)
    return (total / _divisor(outs, sizes, kernel, strides, pads, count_include_pad, x.device, compute)).to(x.dtype)


def _divisor(outs, sizes, kernel, strides, pads, count_include_pad: bool, device, dtype):
    """Each output's divisor as ATen counts it: its window clipped to the padded input (count_include_pad), or to the
    input itself; a product over the dimensions, shaped to broadcast over the pooled dimensions."""
    import torch

    divisor = None
    for axis, (o, n, k, s, p) in enumerate(zip(outs, sizes, kernel, strides, pads)):
        start = torch.arange(o, device=device) * s - p
        end = torch.clamp(start + k, max=n + p)
        count = end - start if count_include_pad else torch.clamp(end, max=n) - torch.clamp(start, min=0)
        count = count.to(dtype).reshape([o] + [1] * (len(outs) - axis - 1))
        divisor = count if divisor is None else divisor * count
    return divisor
