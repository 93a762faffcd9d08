"""A launch-heavy seed launches through its compiled kernels (kernelevo.seeds.inductor.launches), and the judge counts
those
launches (fitness.judge.guards.LaunchCounter). On the CPU the JIT returns no compiled kernel, so the compiled path
is driven here by stand-ins of a JIT kernel and its compiled kernel; the seed itself is judged through the
interpreter."""
import ast
import json
import types
from pathlib import Path

import pytest
import torch
from triton.compiler import CompiledKernel

from conftest import DEVICE, FIXTURES, make_evaluator
from fitness.judge.guards import LaunchCounter
from fitness.judge.static_check import check_source
from fitness.problems.problem import resolve_problem
from kernelevo.seeds.inductor import launches
from kernelevo.seeds.inductor.convert import convert


class Compiled:
    """A compiled kernel's stand-in: its launcher (``run``) records what it was given."""

    def __init__(self, calls):
        self.calls, self.function, self.packed_metadata = calls, 7, "metadata"

    def run(self, *args):
        self.calls.append(("compiled", args[:3], args[3:9], args[9:]))


class Kernel:
    """A JIT kernel's stand-in: ``[grid](...)`` records the launch and returns what the JIT returns (`returns`)."""

    def __init__(self, arg_names, returns=True):
        self.arg_names, self.calls, self.returns = arg_names, [], returns

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append(("jit", grid, args, kwargs))
            return Compiled(self.calls) if self.returns else None
        return launch


def helper(stream=None, compiled_kernel=Compiled):
    """The LaunchSites helper as a seed defines it, with `compiled_kernel` as `triton.compiler.CompiledKernel` (the
    stand-in's class unless given) and torch's current stream `stream` (a list: its first item is the stream's
    handle)."""
    stream = [11] if stream is None else stream
    namespace = {"triton": types.SimpleNamespace(compiler=types.SimpleNamespace(CompiledKernel=compiled_kernel)),
                 "torch": types.SimpleNamespace(cuda=types.SimpleNamespace(
                     current_stream=lambda: types.SimpleNamespace(cuda_stream=stream[0])))}
    exec(launches.LAUNCH_SITES_HELPER, namespace)
    return namespace["LaunchSites"]()


def launch(sites, site, kernel, grid, *args, **constexprs):
    """One launch as a converted seed's forward writes it."""
    if not sites.run(site, *args):
        sites.launch(site, kernel, grid, *args, **constexprs)


def test_a_sites_later_launches_go_through_its_compiled_kernel_with_what_the_site_made_once():
    sites, kernel = helper(), Kernel(["x_ptr", "out_ptr", "n", "XBLOCK", "YBLOCK"])
    x, out = torch.zeros(8), torch.zeros(8)
    sites.check(x, out)
    for _ in range(3):
        launch(sites, 0, kernel, (4,), x, out, 8, YBLOCK=2, XBLOCK=16, num_warps=4)
    assert [c[0] for c in kernel.calls] == ["jit", "compiled", "compiled"]
    assert kernel.calls[0][3] == {"YBLOCK": 2, "XBLOCK": 16, "num_warps": 4}
    # the grid as three axes, the stream, the kernel's function and metadata, no launch metadata or hooks, then the
    # arguments and the constexprs in signature order
    assert kernel.calls[1] == ("compiled", (4, 1, 1), (11, 7, "metadata", None, None, None), (x, out, 8, 16, 2))


def test_another_site_of_the_same_kernel_starts_through_the_jit():
    sites, kernel = helper(), Kernel(["x_ptr", "n", "XBLOCK"])
    x = torch.zeros(8)
    sites.check(x)
    launch(sites, 0, kernel, (1,), x, 8, XBLOCK=8)
    launch(sites, 1, kernel, (2,), x, 4, XBLOCK=8)
    launch(sites, 1, kernel, (2,), x, 4, XBLOCK=8)
    assert [c[0] for c in kernel.calls] == ["jit", "jit", "compiled"]


@pytest.mark.parametrize("changed", ["alignment", "shape", "dtype"])
def test_a_change_of_forwards_tensors_sends_every_site_back_through_the_jit(changed):
    sites, kernel = helper(), Kernel(["x_ptr", "XBLOCK"])
    storage = torch.zeros(64)
    x = storage[:16]
    other = {"alignment": storage[1:17], "shape": storage[:32], "dtype": storage[:16].double()}[changed]
    for tensor in (x, x, other, other, x):
        sites.check(tensor)
        launch(sites, 0, kernel, (1,), tensor, XBLOCK=16)
    assert [c[0] for c in kernel.calls] == ["jit", "compiled", "jit", "compiled", "jit"]


def test_a_change_of_stream_sends_every_site_back_through_the_jit_and_the_next_launches_take_the_new_one():
    stream = [11]
    sites, kernel = helper(stream), Kernel(["x_ptr", "XBLOCK"])
    x = torch.zeros(4)
    for handle in (11, 11, 12, 12):
        stream[0] = handle
        sites.check(x)
        launch(sites, 0, kernel, (1,), x, XBLOCK=4)
    assert [c[0] for c in kernel.calls] == ["jit", "compiled", "jit", "compiled"]
    assert kernel.calls[1][2][0] == 11 and kernel.calls[3][2][0] == 12


def test_no_compiled_kernel_from_the_jit_or_a_constexpr_left_to_its_default_keeps_the_jit():
    interpreted, defaulted = Kernel(["x_ptr", "XBLOCK"], returns=False), Kernel(["x_ptr", "XBLOCK", "EVEN"])
    sites = helper()
    x = torch.zeros(4)
    sites.check(x)
    for _ in range(2):
        launch(sites, 0, interpreted, (1,), x, XBLOCK=4)
        launch(sites, 1, defaulted, (1,), x, XBLOCK=4)  # EVEN left to the kernel's default: not known here
    assert [c[0] for c in interpreted.calls] == ["jit", "jit"]
    assert [c[0] for c in defaulted.calls] == ["jit", "jit"]


class CountedKernel(CompiledKernel):
    """A compiled kernel whose launcher (`_run`) records its launches; nothing loaded, so nothing to unload."""

    def __init__(self, module_name):  # noqa: super().__init__ would compile
        self._run, self.launched = self.launch, []
        self.src = types.SimpleNamespace(fn=types.SimpleNamespace(__module__=module_name))

    def launch(self, *args):
        self.launched.append(args)

    def __del__(self):
        pass


def test_the_judge_counts_a_launch_through_a_compiled_kernel_once_and_launches_nothing_compiling_only():
    counter = LaunchCounter()
    counter._wrap_compiled_launch(CountedKernel)
    kernel = CountedKernel("candidate")
    assert kernel.run is kernel.run  # made once per kernel
    kernel.run(1, 1, 1)
    assert counter.count("candidate") == 1 and len(kernel.launched) == 1
    counter.active += 1  # inside the JIT's launch, which counted it already
    kernel.run(1, 1, 1)
    counter.active -= 1
    assert counter.count("candidate") == 1 and len(kernel.launched) == 2
    with counter.compiling_only():
        kernel.run(1, 1, 1)
    assert counter.count("candidate") == 1 and len(kernel.launched) == 2


def test_the_judge_counts_every_launch_a_site_makes_through_its_compiled_kernel():
    counter = LaunchCounter()
    counter._wrap_compiled_launch(CountedKernel)
    compiled = CountedKernel("candidate")
    compiled.function, compiled.packed_metadata = 7, "metadata"
    sites, x = helper(compiled_kernel=CompiledKernel), torch.zeros(4)  # triton's own class, which CountedKernel is

    class Jit:  # the JIT's launch returns the compiled kernel (and is counted by the JIT's own wrapper, not here)
        arg_names = ["x_ptr", "XBLOCK"]

        def __getitem__(self, grid):
            return lambda *args, **constexprs: compiled

    sites.check(x)
    for _ in range(4):
        launch(sites, 0, Jit(), (2,), x, XBLOCK=4)
    assert len(compiled.launched) == 3 and counter.count("candidate") == 3  # every launch after the site's first
    assert compiled.launched[0] == (2, 1, 1, 11, 7, "metadata", None, None, None, x, 4)


def converted(many: int | None, monkeypatch) -> tuple[dict, str]:
    captured = json.loads((FIXTURES / "matmul_bias_relu_template.json").read_text())
    spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
    if many is not None:
        monkeypatch.setattr(launches, "MANY_LAUNCHES", many)
    return captured, convert(captured, Path(spec.path).read_text(), spec.name, interpreter=True)


@pytest.mark.skipif(DEVICE != "cpu", reason="converted for Triton's interpreter")
def test_a_seed_with_many_launches_launches_through_sites_and_is_judged_correct(monkeypatch, sandbox):
    captured, source = converted(1, monkeypatch)  # every seed launches "many" kernels here
    forward = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    text = ast.unparse(forward)
    assert "LAUNCHES.check(" in text and "if not LAUNCHES.run(0, " in text and "LAUNCHES.launch(0, " in text
    assert "](" not in text
    assert "class LaunchSites" in source and "compiled kernel" in source.split('"""')[1]
    assert check_source(source) == []
    with make_evaluator(problem=captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"],
                        sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


@pytest.mark.skipif(DEVICE != "cpu", reason="converted for Triton's interpreter")
def test_a_seed_with_few_launches_keeps_tritons_launch(monkeypatch):
    _, source = converted(None, monkeypatch)
    assert "LAUNCHES" not in source and "LaunchSites" not in source


def test_each_launch_of_a_forward_is_a_site_of_its_own_and_other_calls_stay():
    body = ast.parse("buf = torch.empty(4)\nk0[(2,)](x, buf, XBLOCK=4)\nk1[(1,)](buf, y)\nk0[(2,)](y, buf, XBLOCK=4)\n"
                     "other[0](x)").body
    assert launches.through_sites(body, {"k0", "k1"}, ["x", "y"], many=4) == (body, False)
    rewritten, done = launches.through_sites(body, {"k0", "k1"}, ["x", "y"], many=3)
    assert done and ast.unparse(body[1]) == "k0[2,](x, buf, XBLOCK=4)"  # forward's own statements are left as they were
    assert [ast.unparse(s) for s in rewritten] == [
        "LAUNCHES.check(x, y)", "buf = torch.empty(4)",
        "if not LAUNCHES.run(0, x, buf):\n    LAUNCHES.launch(0, k0, (2,), x, buf, XBLOCK=4)",
        "if not LAUNCHES.run(1, buf, y):\n    LAUNCHES.launch(1, k1, (1,), buf, y)",
        "if not LAUNCHES.run(2, y, buf):\n    LAUNCHES.launch(2, k0, (2,), y, buf, XBLOCK=4)", "other[0](x)"]


def test_a_launch_inside_a_loop_or_branch_is_not_a_site():
    body = ast.parse("for i in range(2):\n    k0[(2,)](x, i)\nif x.numel():\n    k0[(1,)](x, 0)\nk0[(3,)](x, 1)").body
    rewritten, done = launches.through_sites(body, {"k0"}, ["x"], many=1)
    assert done and [ast.unparse(s).splitlines()[-1].strip() for s in rewritten] == [
        "LAUNCHES.check(x)", "k0[2,](x, i)", "k0[1,](x, 0)", "LAUNCHES.launch(0, k0, (3,), x, 1)"]
    assert ast.unparse(rewritten[-1]).startswith("if not LAUNCHES.run(0, x, 1):")
