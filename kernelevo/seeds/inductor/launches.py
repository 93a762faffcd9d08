"""Launch-heavy seeds launch their kernels through the compiled kernels, as Inductor's own launcher does.

Triton's JIT launch (``kernel[grid](...)``) binds and specialises its arguments again on every call, which costs
more host time per launch than the compiled kernel's own launcher, ``CompiledKernel[grid]`` (docs/measurements.md).
A forward of a thousand launches (an RNN's steps unrolled) is then bound by its host. Inductor
launches the same kernels through its own launcher and is faster with them.

So a seed whose forward makes at least ``MANY_LAUNCHES`` launches gets the ``LaunchSites`` helper below, and each of
its launches becomes ``if not LAUNCHES.run(site, *args): LAUNCHES.launch(site, kernel, grid, *args, **constexprs)``:

* The first launch at a site goes through Triton's JIT, which compiles (or finds) the kernel for the arguments'
  specialisation and returns it.
* Later launches at that site call its compiled kernel's launcher (``CompiledKernel.run``) with what the site made
  once: the grid, the stream and the constexprs. So a launch builds neither its grid nor its keyword arguments again,
  and fetches no stream. It passes no launch hooks (a candidate may not read Triton's knobs): a profiler that hooks
  Triton's launches (proton) sees a site's first launch only. Nsight Compute and the judge's counter see them all.
* That holds while forward's tensors keep the shapes, strides, dtypes and 16-byte alignment they had, and the stream
  is the same (``LAUNCHES.check``, first in forward). The specialisation depends on nothing else:
  every other argument of an Inductor launch is a literal, or a size or stride of those tensors.
* Under Triton's interpreter the JIT returns no compiled kernel, so every launch goes through it.

The judge counts these launches as it counts the JIT's (``fitness.judge.guards.LaunchCounter``). The kernels and
their tunable constants are unchanged.
"""
from __future__ import annotations

import ast

from kernelevo.core import pyast

# a forward with at least this many launches launches through its compiled kernels: the judge's timer hides up to
# MAX_SPIN_S of a forward's launch (fitness.measure.timing), a few hundred JIT launches (docs/measurements.md), so
# fewer gain nothing there
MANY_LAUNCHES = 64
LAUNCH_SITES = "LAUNCHES"
NOTE = (f" forward launches {MANY_LAUNCHES} kernels or more, so each launch after a site's first goes through its "
        "compiled kernel (LaunchSites, below): Triton's JIT launch would bind and specialise the arguments again.")
LAUNCH_SITES_HELPER = '''
class LaunchSites:
    """Launches through each launch site's compiled kernel after the site's first launch through Triton's JIT (which
    binds and specialises the arguments on every call: half a launch's host time). `run` is a known site's launch,
    with its grid, stream and constexprs made once, and no launch hooks; `check` forgets every site when forward's
    tensors change shape, strides, dtype or 16-byte alignment (all a site's specialisation depends on), or the
    stream changes."""

    def __init__(self):
        self.sites = {}
        self.key = None
        self.stream = None

    def check(self, *tensors):
        key = tuple((t.shape, t.stride(), t.dtype, t.data_ptr() % 16) for t in tensors)
        if key != self.key or self.sites and torch.cuda.current_stream().cuda_stream != self.stream:
            self.sites.clear()
            self.key = key

    def run(self, site, *args):
        found = self.sites.get(site)
        if found is None:
            return False
        found[0].run(*found[1], *args, *found[2])
        return True

    def launch(self, site, kernel, grid, *args, **constexprs):
        compiled = kernel[grid](*args, **constexprs)
        names = kernel.arg_names[len(args):]
        if isinstance(compiled, triton.compiler.CompiledKernel) and all(n in constexprs for n in names):
            if not self.sites:
                self.stream = torch.cuda.current_stream().cuda_stream
            grid = tuple(grid) + (1,) * (3 - len(grid))
            head = (*grid, self.stream, compiled.function, compiled.packed_metadata, None, None, None)
            self.sites[site] = (compiled, head, tuple(constexprs[n] for n in names))


LAUNCHES = LaunchSites()
'''


def is_launch(node: ast.AST, kernels) -> bool:
    """``kernel[grid](...)`` of one of `kernels` (names), as a statement of its own."""
    call = node.value if isinstance(node, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript) and \
        isinstance(call.func.value, ast.Name) and call.func.value.id in kernels


def through_sites(body: list[ast.stmt], kernels, tensors: list[str],
                  many: int | None = None) -> tuple[list[ast.stmt], bool]:
    """`body` (forward's statements) with each launch of `kernels` through ``LAUNCHES`` and ``LAUNCHES.check`` of
    `tensors` (forward's bound tensors) first, when it launches at least `many` times; else `body` unchanged.
    Also says whether it rewrote. `many`: ``MANY_LAUNCHES`` unless given. Only the launches that are statements of
    `body` itself become sites (Inductor's call() is straight-line code): one inside a loop or a branch would be one
    site for launches whose arguments may differ."""
    sites = [i for i, statement in enumerate(body) if is_launch(statement, kernels)]
    if len(sites) < (MANY_LAUNCHES if many is None else many):
        return body, False
    rewritten = list(body)
    for site, i in enumerate(sites):
        call = body[i].value
        known = pyast.parse(f"{LAUNCH_SITES}.run({site})", mode="eval").body
        known.args += call.args
        first = pyast.parse(f"{LAUNCH_SITES}.launch({site})", mode="eval").body
        first.args += [call.func.value, call.func.slice, *call.args]
        first.keywords = call.keywords
        rewritten[i] = ast.If(test=ast.UnaryOp(op=ast.Not(), operand=known), body=[ast.Expr(first)], orelse=[])
    check = pyast.parse(f"{LAUNCH_SITES}.check({', '.join(tensors)})").body
    return [*check, *rewritten], True
