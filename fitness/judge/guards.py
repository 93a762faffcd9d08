"""Honesty guards that watch a candidate's ``forward`` while it runs (inside the evaluation worker).

* ``LaunchCounter`` counts Triton kernel launches (the JIT's and those through a compiled kernel), by the module the
  kernel was defined in, so a candidate must launch at least one kernel of its own: a decorative or absent kernel is
  caught.
* ``TorchOpTrace`` records the aten ops that ``forward`` dispatches (a TorchDispatchMode), so work done by torch
  instead of the candidate's kernels is caught. Ops issued by Triton itself while launching are ignored; the
  candidate's own callables a launch calls (a callable grid, a kernel's pre-run hooks) are traced.

The launch counter also provides the compile-only mode of ``fitness.judge.compile_ahead``: while it is on, a Triton
launch compiles the kernel (``warmup=True``) and loads it without launching, an autotuned kernel compiles every
config without benchmarking (so no autotuning choice is made), and nothing is counted as a launch. And it tells
``on_compile`` when Triton builds a kernel (its name) and when it is done (None), ahead or on a first real call, so
the worker can say so (``fitness.common.stage.CompileStage``) and the sandbox time it.

Both are installed by the fork server (``fitness.workers.worker`` at import) before candidate code exists.
"""
from __future__ import annotations

import inspect
from collections import Counter
from contextlib import contextmanager

from torch.utils._python_dispatch import TorchDispatchMode

from fitness.judge.randomness import is_draw

# Allocation, views, reshapes, copies and metadata: the torch ops a Triton wrapper legitimately needs.
DATA_MOVEMENT_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill_", "zero_", "arange", "scalar_tensor",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "permute", "transpose", "transpose_", "t", "t_",
    "expand", "expand_as", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice", "select", "narrow",
    "as_strided", "alias", "detach", "detach_", "clone", "contiguous", "copy_", "_to_copy", "to", "lift_fresh",
    "split", "split_with_sizes", "chunk", "unbind", "flatten", "unflatten", "movedim", "cat", "stack",
    "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous",
    "resize_", "set_", "pad", "constant_pad_nd",  # F.pad: padding is data movement
})


class CompileAbort(BaseException):
    """Ends a compile-only pass: it would have launched GPU work. A BaseException, so that a candidate's
    `except Exception` does not swallow it."""


class LaunchCounter:
    """Counts Triton launches per defining module by wrapping the `run` of Triton's kernel classes."""

    def __init__(self):
        self.launches: Counter = Counter()
        self.active = 0  # > 0 while a Triton launch is in progress (its own torch ops are not the candidate's)
        self.compile_only = False
        self.on_compile = None  # called with a kernel's name when Triton starts building it, with None when done
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        for cls in self._kernel_classes():
            self._wrap(cls)
        self._wrap_autotuner()
        self._wrap_compile()
        self._wrap_compiled_launch()
        self._installed = True

    @contextmanager
    def compiling_only(self):
        """Triton launches compile and load their kernel but launch nothing, and are not counted."""
        self.compile_only = True
        try:
            yield
        finally:
            self.compile_only = False

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
        compiles = cls.__name__ == "JITFunction"  # the interpreter's run has no compile-only form

        def run(kernel, *args, **kwargs):
            if callable(kwargs.get("grid")):
                kwargs["grid"] = counter.outside_launch(kwargs["grid"])
            hooks = getattr(kernel, "pre_run_hooks", None)
            if hooks:  # read by the launch: swapped for traced ones while it runs
                kernel.pre_run_hooks = [counter.outside_launch(hook) for hook in hooks]
            try:
                return launch(kernel, *args, **kwargs)
            finally:
                if hooks:
                    kernel.pre_run_hooks = hooks

        def launch(kernel, *args, **kwargs):
            if counter.compile_only:
                if not compiles:
                    raise CompileAbort("the interpreter cannot compile without running")
                return counter._compile(original, kernel, args, kwargs)
            if not kwargs.get("warmup", False):
                fn = getattr(kernel, "fn", None)
                counter.launches[getattr(fn, "__module__", "?")] += 1
            counter.active += 1
            try:
                return original(kernel, *args, **kwargs)
            finally:
                counter.active -= 1

        cls.run = run

    def outside_launch(self, fn):
        """`fn`, a callable of the candidate's that a launch calls (a grid computed from the launch's arguments, a
        pre-run hook), run as the candidate's own code: its torch ops traced, its launches counted, as if no launch
        were active (a torch.matmul in a grid was hidden inside the launch, issue 63)."""
        counter = self

        def call(*args, **kwargs):
            active, counter.active = counter.active, 0
            try:
                return fn(*args, **kwargs)
            finally:
                counter.active = active
        return call

    def _compile(self, original, kernel, args, kwargs):
        """Compile (warmup) and load the kernel, creating its launcher, without launching it."""
        self.active += 1
        try:
            compiled = original(kernel, *args, **{**kwargs, "warmup": True})
            init = getattr(compiled, "_init_handles", None)
            if callable(init):
                init()
            return compiled
        finally:
            self.active -= 1

    def _wrap_autotuner(self) -> None:
        """In compile-only mode an autotuned kernel compiles each (pruned) config and benchmarks none: its choice
        is made on the first real call. Triton versions whose Autotuner lacks these attributes fall back to its
        own run, whose benchmark aborts the pass at its first torch op (the L2 flush's zero_)."""
        try:
            from triton.runtime.autotuner import Autotuner
        except ImportError:  # pragma: no cover - every supported triton has it
            return
        original = Autotuner.run
        counter = self

        def run(tuner, *args, **kwargs):
            if not counter.compile_only or not all(hasattr(tuner, a) for a in ("arg_names", "configs", "fn")):
                return original(tuner, *args, **kwargs)
            tuner.nargs = dict(zip(tuner.arg_names, args))
            try:
                configs = tuner.prune_configs(kwargs) if len(tuner.configs) > 1 else tuner.configs
                for config in configs:
                    tuner.fn.run(*args, **kwargs, **config.all_kwargs())
            finally:
                tuner.nargs = None
            return None

        Autotuner.run = run

    def _wrap_compile(self, compiler=None) -> None:
        """Triton's ``compile`` (``triton.compiler.compile``: what a JITFunction binds the first time it runs on a
        device, so this must precede any kernel) reports each build to `on_compile`. A Triton without it builds
        unreported: a compile then counts as whatever its caller's stage says."""
        if compiler is None:
            import triton.compiler as compiler
        original = getattr(compiler, "compile", None)
        if original is None:  # pragma: no cover - every supported triton has it
            return
        counter = self

        def compile(src, *args, **kwargs):
            report = counter.on_compile
            if report is None:
                return original(src, *args, **kwargs)
            options = kwargs.get("options") or {}
            report(f"{getattr(src, 'name', None) or src} (num_warps={options.get('num_warps', '?')})")
            try:
                return original(src, *args, **kwargs)
            finally:
                report(None)

        compiler.compile = compile

    def _wrap_compiled_launch(self, compiled_kernel=None) -> None:
        """A launch through a compiled kernel (``CompiledKernel.run``: what its ``[grid]`` launcher and the JIT's
        launch call; a launch-heavy seed launches so, ``kernelevo.seeds.inductor.launches``) is counted as a JIT launch
        is, unless it is the JIT's own (already counted); in compile-only mode it launches nothing. A Triton whose
        CompiledKernel has no ``run`` property keeps its own: such launches go uncounted there, so a candidate
        that launches only so is caught as launching nothing."""
        if compiled_kernel is None:
            from triton.compiler import CompiledKernel as compiled_kernel
        original = inspect.getattr_static(compiled_kernel, "run", None)
        if not isinstance(original, property):  # pragma: no cover - triton 3.3 on has it
            return
        counter, key = self, f"_counted_run_{id(self)}"  # a counter's own: a second one wraps the first's

        def run(kernel):
            launcher = original.fget(kernel)
            made = kernel.__dict__.get(key)
            if made is not None and made[0] is launcher:
                return made[1]

            def counted(*args, **kwargs):
                if counter.active:  # the JIT's launch, counted there
                    return launcher(*args, **kwargs)
                if counter.compile_only:
                    return None
                source = getattr(getattr(kernel, "src", None), "fn", None)
                counter.launches[getattr(source, "__module__", "?")] += 1
                counter.active += 1
                try:
                    return launcher(*args, **kwargs)
                finally:
                    counter.active -= 1
            kernel.__dict__[key] = (launcher, counted)  # made once per kernel: launches stay cheap
            return counted

        compiled_kernel.run = property(run)

    def reset(self) -> None:
        self.launches.clear()

    def count(self, module_name: str) -> int:
        return self.launches.get(module_name, 0)


class TorchOpTrace(TorchDispatchMode):
    """Records the aten ops dispatched while active, except those issued inside a Triton launch; random draws
    (``fitness.judge.randomness.is_draw``) also in `draws`."""

    def __init__(self, launch_counter: LaunchCounter):
        super().__init__()
        self.ops: Counter = Counter()
        self.draws: Counter = Counter()
        self._launch_counter = launch_counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self._launch_counter.active:
            self.ops[func.overloadpacket.__name__] += 1
            if is_draw(func, args, kwargs):
                self.draws[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    def compute_ops(self, extra_allowed=(), draws_allowed=()) -> list[str]:
        """The recorded ops that are neither data movement nor allowed by the policy, sorted; a draw is allowed
        when the reference made it too (`draws_allowed`) and the same op never read a tensor's values here."""
        draws = {op for op in draws_allowed if self.draws[op] and self.draws[op] == self.ops[op]}
        allowed = DATA_MOVEMENT_OPS | set(extra_allowed) | draws
        return sorted(op for op in self.ops if op not in allowed)
