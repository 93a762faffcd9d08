"""Compiling a candidate's Triton kernels ahead of the GPU lock, without launching any GPU work.

Compiling is seconds of CPU; the GPU lock is for GPU work. So before its trials, a candidate's ``forward`` runs
once, outside any lock, with

* Triton launches made compile-only (``LaunchCounter.compiling_only``: compile, load the module, build the
  launcher, launch nothing; autotuned kernels compile every config and choose none), and
* ``NoKernelMode``, a TorchDispatchMode that lets through only torch ops that launch no kernel (allocation, views,
  metadata) and aborts the pass on anything else (``CompileAbort``).

Its outputs are never written (no kernel ran) and are dropped. When the pass aborts or raises, the kernels not yet
compiled compile on the first real call instead, inside the shared lock; the outcome is recorded as
``"ahead"`` or ``"fallback: <reason>"``. The pass runs on a copy of the model, so state a forward caches on its
first call (a buffer a kernel would have filled) is not left unfilled in the model that is judged.

Nothing in the pass reads a value, so it runs on the meta device first (``compile_pass``): a copy of the model whose
tensors are meta tensors and inputs made by get_inputs on the meta device, with the dtypes, shapes, strides and
16-byte alignment (a meta tensor's data_ptr is its storage offset in bytes) that Triton specialises a kernel on,
and no device memory: at KernelBench's sizes the device pass held the inputs, the outputs forward allocates and a
copy of the parameters (LogSoftmax 4096 x 393216 fp32: 6.4 GB of input and 6.4 GB of output). Where forward fails
on meta tensors (a device check, a .cuda()), the pass runs once more on a device copy and real inputs.
"""
from __future__ import annotations

import copy

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fitness.judge.guards import CompileAbort, LaunchCounter

# Ops that allocate or only change metadata: no kernel, no copy, no read of device memory.
NO_KERNEL_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "resize_", "set_",
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "as_strided_", "alias", "detach", "detach_",
    "lift_fresh", "permute", "transpose", "transpose_", "t", "t_", "expand", "squeeze", "squeeze_", "unsqueeze",
    "unsqueeze_", "slice", "select", "narrow", "split", "split_with_sizes", "unbind", "diagonal", "unfold",
    "view_as_real", "view_as_complex", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous",
    "size", "stride", "dim",
})


class NoKernelMode(TorchDispatchMode):
    """Allows NO_KERNEL_OPS; any other op aborts the pass (and is remembered, should the candidate catch it)."""

    def __init__(self):
        super().__init__()
        self.blocked: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in NO_KERNEL_OPS:
            self.blocked = self.blocked or name
            raise CompileAbort(f"torch op '{name}' would launch GPU work")
        return func(*args, **(kwargs or {}))


def copy_model(model):
    """A copy for the compile pass (its parameters are copied on the device: call it under the shared lock)."""
    return copy.deepcopy(model)


def meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with `tensor`'s dtype, shape, strides and storage offset, so its data_ptr (the offset in bytes)
    has the same alignment as a device tensor's; no memory."""
    elements = -(-tensor.untyped_storage().nbytes() // tensor.element_size())
    storage = torch.empty(elements, dtype=tensor.dtype, device="meta")
    return storage.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def meta_copy(model):
    """A copy of the model whose parameters, buffers and tensor attributes are meta tensors (``meta_like``); other
    state is deep-copied as ``copy_model`` does (call it under the shared lock)."""
    memo = {}
    for module in model.modules():
        for value in [*module._parameters.values(), *module._buffers.values(), *vars(module).values()]:
            if isinstance(value, torch.Tensor) and id(value) not in memo:
                meta = meta_like(value.detach())
                memo[id(value)] = (torch.nn.Parameter(meta, requires_grad=value.requires_grad)
                                   if isinstance(value, torch.nn.Parameter) else meta)
    return copy.deepcopy(model, memo)


def _pass(model, inputs: list, launches: LaunchCounter) -> tuple[str, bool]:
    """(outcome, whether another pass would end the same): "ahead", or a torch op that would launch GPU work, end
    any pass alike; an exception may be the meta tensors'."""
    mode = NoKernelMode()
    try:
        with launches.compiling_only(), mode:
            model(*inputs)
    except CompileAbort as abort:
        return f"fallback: {abort}", True
    except Exception as exc:  # noqa: BLE001 - the real first call reports the candidate's own errors
        return f"fallback: {type(exc).__name__}: {exc}"[:300], False
    if mode.blocked:
        return f"fallback: torch op '{mode.blocked}' would launch GPU work", True
    return "ahead", True


def compile_before_memory(build, meta_inputs, launches: LaunchCounter) -> str | None:
    """The compile pass before the worker holds any device memory (its memory slot): on a model `build()` makes on
    the meta device and `meta_inputs()`. Its outcome when final, else None (a model or forward that meta tensors
    cannot run: the pass runs as ``compile_pass`` does, once the model is on the device)."""
    try:
        model, inputs = build(), meta_inputs()
    except Exception:  # noqa: BLE001 - the device construction reports the candidate's own errors
        return None
    how, final = _pass(model, inputs, launches)
    return how if final else None


def compile_ahead(model, inputs: list, launches: LaunchCounter) -> str:
    """Run forward once compile-only; "ahead" when every kernel it reached compiled, else "fallback: <reason>"."""
    return _pass(model, inputs, launches)[0]


def meta_pass(model, meta_inputs) -> tuple | str:
    """(``meta_copy`` of the model, `meta_inputs()`) for ``compile_pass``, or why they could not be made (call it
    under the shared lock: ``meta_copy``)."""
    try:
        return meta_copy(model), meta_inputs()
    except Exception as exc:  # noqa: BLE001 - state or a get_inputs that the meta device cannot hold
        return f"fallback: on the meta device: {type(exc).__name__}: {exc}"[:300]


def compile_pass(meta: tuple | str, device_pass, launches: LaunchCounter) -> str:
    """``compile_ahead`` on `meta` (``meta_pass``); should it fail on something only meta tensors do (or could not
    be made), once more on `device_pass()`: a device copy of the model and real inputs (which takes the shared lock
    to make them), reported as "<outcome> (on device tensors: <why the meta pass failed>)"."""
    how, final = (meta, False) if isinstance(meta, str) else _pass(*meta, launches)
    if final:
        return how
    try:
        model_copy, inputs = device_pass()
    except Exception as exc:  # noqa: BLE001
        return f"fallback: the model could not be copied: {type(exc).__name__}: {exc}"[:300]
    meta_failure = how.removeprefix("fallback: ")
    return f"{compile_ahead(model_copy, inputs, launches)} (on device tensors: {meta_failure})"[:400]
