"""Where a Triton launch's host time goes. level3/34's best kernel spends 15 us of host time per launch (1,024
launches per forward, experiments/results/kernelbench_part10/launch_bound.json) where max-autotune spends about 10.
On a GPU, host microseconds per launch of one small kernel shaped like the seeds' GEMM template (four pointers,
four constexprs, num_warps and num_stages as keywords), launched back to back:

* ``jit``: ``kernel[grid](...)``, Triton's JIT launch, as the seeds launch;
* ``jit_counted``: the same with the judge's launch counter installed (``fitness.judge.guards.LaunchCounter``);
* ``compiled_runner``: the compiled kernel's own launcher, ``compiled[grid](*args)``, built once (no binding);
* ``compiled_run``: ``compiled.run(...)`` with the stream fetched once (the C launcher and its Python wrapper);
* ``keyed``: a launch keyed in Python on the arguments' specialisation (dtype and 16-byte alignment of tensors, the
  value class of ints), then the compiled kernel's launcher: the path a candidate could take without Triton's binder;

the torch calls a seed's wrapper makes between launches (``empty_strided``, ``as_strided``); and, with
``--problem``/``--candidate``, that candidate's forward (host time, launches) with Triton's launch, with the counter,
and with every launch keyed as above. A diagnostic only::

    python3 experiments/diagnostics/launch_cost.py [--problem P.py --candidate best_kernel.py] \
        --out $OUT/launch_cost.json
"""
from __future__ import annotations

import argparse
import time

import torch
import triton
import triton.language as tl

from experiments.diagnostics.launch_bound import graph_ms, loaded, timed_ms, triton_launches, written

CALLS = 4000
EXTRA = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@triton.jit
def gemm_shaped(a_ptr, b_ptr, c_ptr, d_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr):
    offsets = tl.arange(0, BLOCK_M)
    tl.store(d_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets) + tl.load(c_ptr + offsets))


def host_us(call, calls: int = CALLS) -> float:
    """Host microseconds per call, queued back to back (the GPU keeps up or queues; only the host is timed)."""
    for _ in range(50):
        call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def spec_key(args) -> tuple:
    """What Triton specialises a launch on, read in Python: tensors' dtype and 16-byte alignment, ints' value class."""
    key = []
    for arg in args:
        if isinstance(arg, torch.Tensor):
            key.append((arg.dtype, arg.data_ptr() % 16 == 0))
        elif isinstance(arg, bool) or not isinstance(arg, int):
            key.append(type(arg))
        else:
            key.append((arg == 1, arg % 16 == 0, -2**31 <= arg < 2**31))
    return tuple(key)


class Keyed:
    """A JIT kernel launched through its compiled kernel, found by the arguments' specialisation key; the first
    launch of each key goes through Triton's JIT (which compiles, launches and returns the compiled kernel)."""

    def __init__(self, kernel):
        self.kernel, self.names, self.compiled = kernel, kernel.arg_names, {}

    def launch(self, grid, args, kwargs):
        ordered = list(args) + [kwargs[name] for name in self.names[len(args):]]
        grid = tuple(grid) + (1,) * (3 - len(grid))
        key = (grid, tuple(kwargs.get(name) for name in EXTRA), spec_key(ordered))
        found = self.compiled.get(key)
        if found is None:
            compiled = self.kernel.run(*args, grid=grid, warmup=False, **kwargs)
            self.compiled[key] = (compiled, compiled.function, compiled.packed_metadata)
            return
        compiled, function, metadata = found
        stream = torch.cuda.current_stream().cuda_stream
        compiled.run(grid[0], grid[1], grid[2], stream, function, metadata, None, None, None, *ordered)


def kernel_rows() -> dict:
    a, b, c, d = (torch.randn(64, device="cuda") for _ in range(4))
    consts = dict(BLOCK_M=16, BLOCK_N=32, BLOCK_K=128, GROUP_M=8)
    opts = dict(num_warps=2, num_stages=5)
    grid = (4, 1, 1)
    rows = {"jit": host_us(lambda: gemm_shaped[grid](a, b, c, d, **consts, **opts))}
    compiled = gemm_shaped[grid](a, b, c, d, **consts, **opts)
    args = (a, b, c, d, *consts.values())
    runner = compiled[grid]
    rows["compiled_runner"] = host_us(lambda: runner(*args))
    stream = torch.cuda.current_stream().cuda_stream
    function, metadata, run = compiled.function, compiled.packed_metadata, compiled.run
    rows["compiled_run"] = host_us(lambda: run(4, 1, 1, stream, function, metadata, None, None, None, *args))
    keyed = Keyed(gemm_shaped)
    rows["keyed"] = host_us(lambda: keyed.launch(grid, (a, b, c, d), {**consts, **opts}))
    x = torch.empty(2048, 128, device="cuda")
    rows["torch_empty_strided"] = host_us(
        lambda: torch.empty_strided((8, 256), (256, 1), dtype=torch.float32, device=x.device))
    rows["torch_as_strided"] = host_us(lambda: torch.as_strided(x, (8, 128), (128, 1), 1024))
    rows["torch_current_stream"] = host_us(lambda: torch.cuda.current_stream().cuda_stream)
    from fitness.judge.guards import LaunchCounter

    LaunchCounter().install()
    rows["jit_counted"] = host_us(lambda: gemm_shaped[grid](a, b, c, d, **consts, **opts))
    return rows


def forward_rows(problem_path: str, candidate_path: str) -> dict:
    from triton.runtime.jit import JITFunction

    reference, model, inputs = loaded(problem_path, candidate_path)
    rows = {}
    with torch.no_grad():
        expected = reference(*inputs)
        call = (lambda: model(*inputs))
        launches = triton_launches(call)
        graphed = graph_ms(call)
        rows["triton_launches"], rows["cuda_graph_ms"] = launches, graphed
        rows["jit"] = {"forward_ms": timed_ms(call), "host_ms": host_us(call, 20) / 1e3}
        keyed, original = {}, JITFunction.__getitem__

        def fast(kernel, grid):
            found = keyed.get(id(kernel)) or keyed.setdefault(id(kernel), Keyed(kernel))
            return lambda *args, **kwargs: found.launch(grid, args, kwargs)

        sites = {}

        def site(kernel, grid, runner: bool):
            """One launch site: its first launch through the JIT, then its compiled kernel with the constexprs and
            options it was first given (the seed's are module constants), no key (the diagnostic's inputs stay)."""
            grid = tuple(grid) + (1,) * (3 - len(grid))
            found = sites.get((id(kernel), grid))
            if found is None:
                def first(*args, **kwargs):
                    compiled = kernel.run(*args, grid=grid, warmup=False, **kwargs)
                    tail = tuple(kwargs[name] for name in kernel.arg_names[len(args):])
                    if runner:
                        launch = compiled[grid]
                        sites[(id(kernel), grid)] = lambda *args, **_: launch(*args, *tail)
                    else:
                        run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
                        sites[(id(kernel), grid)] = lambda *args, **_: run(
                            grid[0], grid[1], grid[2], torch.cuda.current_stream().cuda_stream, function, metadata,
                            None, None, None, *args, *tail)
                return first
            return found

        for name, patched in (("keyed", fast), ("site_runner", lambda k, g: site(k, g, True)),
                              ("site_run", lambda k, g: site(k, g, False))):
            JITFunction.__getitem__ = patched
            sites.clear()
            try:
                got = model(*inputs)
                rows[f"{name}_max_abs_difference"] = (expected - got).abs().max().item()
                rows[name] = {"forward_ms": timed_ms(call), "host_ms": host_us(call, 20) / 1e3}
            finally:
                JITFunction.__getitem__ = original
    for name in ("jit", "keyed", "site_runner", "site_run"):
        rows[name]["host_us_per_launch"] = rows[name]["host_ms"] * 1e3 / launches
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem")
    parser.add_argument("--candidate")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    if args.problem:
        rows["forward"] = forward_rows(args.problem, args.candidate)
    import inspect
    from triton.compiler.compiler import CompiledKernel

    rows["compiled_kernel_run_is_property"] = isinstance(inspect.getattr_static(CompiledKernel, "run"), property)
    rows["kernel_us_per_launch"] = kernel_rows()  # last: it installs the judge's counter for good
    written(rows, args.out)


if __name__ == "__main__":
    main()
