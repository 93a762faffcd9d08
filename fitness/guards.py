"""Honesty guards that watch a candidate's ``forward`` while it runs (inside the evaluation worker).

* ``LaunchCounter`` counts Triton kernel launches, by the module the kernel was defined in, so a candidate must
  launch at least one kernel of its own: a decorative or absent kernel is caught.
* ``TorchOpTrace`` records the aten ops that ``forward`` dispatches (a TorchDispatchMode), so work done by torch
  instead of the candidate's kernels is caught. Ops issued by Triton itself while launching are ignored.

Both are installed by the trusted worker before candidate code is imported.
"""
from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

# Allocation, views, reshapes, copies and metadata: the torch ops a Triton wrapper legitimately needs.
DATA_MOVEMENT_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_", "arange", "scalar_tensor",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "permute", "transpose", "transpose_", "t", "t_",
    "expand", "expand_as", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice", "select", "narrow",
    "as_strided", "alias", "detach", "detach_", "clone", "contiguous", "copy_", "_to_copy", "to", "lift_fresh",
    "split", "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "movedim", "cat", "stack",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous",
    "resize_", "set_",
})


class LaunchCounter:
    """Counts Triton launches per defining module by wrapping the `run` of Triton's kernel classes."""

    def __init__(self):
        self.launches: Counter = Counter()
        self.active = 0  # > 0 while a Triton launch is in progress (its own torch ops are not the candidate's)
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        for cls in self._kernel_classes():
            self._wrap(cls)
        self._installed = True

    @staticmethod
    def _kernel_classes() -> list:
        import triton.runtime.jit as jit

        classes = [jit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction
            classes.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - every supported triton has it
            pass
        return classes

    def _wrap(self, cls) -> None:
        original = cls.run
        counter = self

        def run(kernel, *args, **kwargs):
            if not kwargs.get("warmup", False):
                fn = getattr(kernel, "fn", None)
                counter.launches[getattr(fn, "__module__", "?")] += 1
            counter.active += 1
            try:
                return original(kernel, *args, **kwargs)
            finally:
                counter.active -= 1

        cls.run = run

    def reset(self) -> None:
        self.launches.clear()

    def count(self, module_name: str) -> int:
        return self.launches.get(module_name, 0)


class TorchOpTrace(TorchDispatchMode):
    """Records the aten ops dispatched while active, except those issued inside a Triton launch."""

    def __init__(self, launch_counter: LaunchCounter):
        super().__init__()
        self.ops: Counter = Counter()
        self._launch_counter = launch_counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._launch_counter.active:
            self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def compute_ops(self, extra_allowed=()) -> list[str]:
        """The recorded ops that are neither data movement nor allowed by the policy, sorted."""
        allowed = DATA_MOVEMENT_OPS | set(extra_allowed)
        return sorted(op for op in self.ops if op not in allowed)
