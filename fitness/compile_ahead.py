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
"""
from __future__ import annotations

import copy

from torch.utils._python_dispatch import TorchDispatchMode

from fitness.guards import CompileAbort, LaunchCounter

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


def compile_ahead(model, inputs: list, launches: LaunchCounter) -> str:
    """Run forward once compile-only; "ahead" when every kernel it reached compiled, else "fallback: <reason>"."""
    mode = NoKernelMode()
    try:
        with launches.compiling_only(), mode:
            model(*inputs)
    except CompileAbort as abort:
        return f"fallback: {abort}"
    except Exception as exc:  # noqa: BLE001 - the real first call reports the candidate's own errors
        return f"fallback: {type(exc).__name__}: {exc}"[:300]
    if mode.blocked:
        return f"fallback: torch op '{mode.blocked}' would launch GPU work"
    return "ahead"
