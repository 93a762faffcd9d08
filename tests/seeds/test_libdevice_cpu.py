"""libdevice on Triton's interpreter (kernelevo/seeds/kernels/libdevice_*.py, kernelevo/seeds/inductor/libdevice.py):
each CPU form
against torch; every libdevice function Inductor writes has one, and a call of one without is named; a seed whose
kernels call libdevice (KernelBench level1/27 SELU, 29 Softplus, 31 ELU in small) converts into a correct
candidate."""
import ast
import re
from pathlib import Path

import pytest
import torch
import torch._inductor
import triton
import triton.language as tl

from conftest import PROBLEMS, make_evaluator
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor import libdevice
from kernelevo.seeds.inductor.convert import LIBDEVICE_AS_TL, SeedError, convert
from kernelevo.seeds.kernels import libdevice_bessel, libdevice_cpu

# near a Bessel function's zeros its value is its absolute error: within 1e-6 (torch's own fp32 is within 2e-6)
ABSOLUTE = {"j0": 1e-6, "j1": 1e-6, "y0": 1e-6, "y1": 1e-6}


@triton.jit
def _one(x_ptr, o_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o_ptr + i, FN(tl.load(x_ptr + i, mask=i < n)), mask=i < n)


@triton.jit
def _two(x_ptr, y_ptr, o_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(o_ptr + i, FN(tl.load(x_ptr + i, mask=i < n), tl.load(y_ptr + i, mask=i < n)), mask=i < n)


def _on_interpreter(name, args, dtype):
    out = torch.empty(args[0].numel(), dtype=dtype)
    kernel = _one if len(args) == 1 else _two
    form = getattr(libdevice_cpu, libdevice.PREFIX + name, None) or getattr(libdevice_bessel, libdevice.PREFIX + name)
    kernel[(1,)](*args, out, out.numel(), form, triton.next_power_of_2(out.numel()))
    return out


_G = torch.Generator().manual_seed(0)
_SPECIAL = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, float("nan")])
_WIDE = torch.cat([-torch.logspace(-30, 1.9, 120), torch.logspace(-30, 1.9, 120), _SPECIAL])


def _span(lo, hi):
    return torch.cat([torch.linspace(lo, hi, 200), _SPECIAL.clamp(lo, hi), torch.tensor([float("nan")])])


def _randn(n=200, scale=1.0):
    return torch.randn(n, generator=_G) * scale


CASES = {  # name: (torch's function, arguments)
    "expm1": (torch.expm1, [torch.cat([_WIDE, torch.tensor([100.0, -100.0])])]),
    "log1p": (torch.log1p, [torch.cat([torch.logspace(-30, 30, 120), -torch.logspace(-30, -1e-4, 80), _SPECIAL,
                                       torch.tensor([-1.0, -2.0, float("inf")])])]),
    "log10": (torch.log10, [torch.cat([torch.logspace(-30, 30, 200), _SPECIAL, torch.tensor([-1.0, 1000.0])])]),
    "tanh": (torch.tanh, [_WIDE]),
    "fast_tanhf": (torch.tanh, [_WIDE]),
    "sinh": (torch.sinh, [torch.cat([_WIDE, torch.tensor([88.5, -88.5])])]),
    "cosh": (torch.cosh, [torch.cat([_WIDE, torch.tensor([88.5, -88.5])])]),
    "asinh": (torch.asinh, [torch.cat([_WIDE, torch.tensor([1e20, -1e30])])]),
    "acosh": (torch.acosh, [torch.cat([1 + torch.logspace(-7, 30, 200), torch.tensor([1.0, 0.5, float("nan")])])]),
    "atanh": (torch.atanh, [torch.cat([_span(-0.9999, 0.9999), torch.tensor([1.0, -1.0, 2.0])])]),
    "atan": (torch.atan, [torch.cat([_WIDE, torch.logspace(2, 30, 50), -torch.logspace(2, 30, 50)])]),
    "asin": (torch.asin, [torch.cat([_span(-1, 1), torch.tensor([1.5])])]),
    "acos": (torch.acos, [torch.cat([_span(-1, 1), torch.tensor([-1.5])])]),
    "tan": (torch.tan, [_span(-1.5, 1.5)]),
    "erfc": (torch.erfc, [_span(-5, 9)]),
    "erfcx": (torch.special.erfcx, [_span(-5, 20)]),
    "erfinv": (torch.erfinv, [_span(-0.999, 0.999)]),
    "lgamma": (torch.lgamma, [torch.cat([_span(-5.5, 12), torch.logspace(-30, 30, 60),
                                         torch.tensor([1.0, 2.0, 0.0, -1.0, -3.0, 1e-3, -2.5, float("inf")])])]),
    "trunc": (torch.trunc, [_span(-7, 7)]),
    "nearbyint": (torch.round, [torch.cat([_span(-5, 5), torch.arange(-4.5, 5.0), torch.tensor([8388607.5, 3e7])])]),
    "llrint": (lambda x: torch.round(x).long(), [torch.cat([torch.linspace(-5, 5, 41), torch.arange(-4.5, 5.0)])]),
    "isinf": (lambda x: torch.isinf(x).int(), [torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])]),
    "isnan": (lambda x: torch.isnan(x).int(), [torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])]),
    "signbit": (lambda x: torch.signbit(x).int(), [torch.tensor([1.0, -1.0, 0.0, -0.0, -float("inf"), 1e-40])]),
    "ilogb": (lambda x: torch.frexp(x)[1] - 1, [torch.cat([_WIDE[(_WIDE != 0) & ~_WIDE.isnan()],
                                                          torch.tensor([2.0**20 * (1 - 2.0**-24), 1e-40, 3e38])])]),
    "atan2": (torch.atan2, [torch.cat([_randn(scale=3), torch.tensor([0.0, -0.0, 0.0, 1.0, float("nan")])]),
                            torch.cat([_randn(scale=3), torch.tensor([-1.0, -1.0, 0.0, 0.0, 1.0])])]),
    "copysign": (torch.copysign, [_randn(), torch.cat([_randn(196), torch.tensor([0.0, -0.0, 0.0, -0.0])])]),
    "fmod": (torch.fmod, [torch.cat([_randn(scale=10), torch.tensor([0.3, -0.3, 7.0])]),
                          torch.cat([_randn(), torch.tensor([0.1, 0.1, -3.5])])]),
    "hypot": (torch.hypot, [_randn(scale=1e20), _randn(scale=1e20)]),
    "pow": (torch.pow, [torch.cat([torch.rand(200, generator=_G) * 10,
                                   torch.tensor([-2.0, -2.0, 0.0, 0.0, 1.0, -8.0])]),
                        torch.cat([_randn(scale=5), torch.tensor([3.0, 2.0, 0.0, -1.0, float("nan"), 0.5])])]),
    "ldexp": (torch.ldexp, [_randn(), torch.randint(-20, 20, (200,), generator=_G, dtype=torch.int32)]),
    "nextafter": (torch.nextafter, [torch.cat([_randn(), torch.tensor([0.0, 0.0, 1.0, 2.0])]),
                                    torch.cat([_randn(), torch.tensor([1.0, -1.0, 1.0, 5.0])])]),
    "mul_rn": (torch.mul, [_randn(), _randn()]),
    "j0": (torch.special.bessel_j0, [torch.cat([_span(-30, 30), torch.tensor([7.99, 8.0, 8.01, 1e4])])]),
    "j1": (torch.special.bessel_j1, [torch.cat([_span(-30, 30), torch.tensor([7.99, 8.0, -8.01, 1e4])])]),
    "y0": (torch.special.bessel_y0, [torch.cat([_span(1e-3, 40), torch.tensor([1e-6, 8.0, 1e4, 0.0, -1.0])])]),
    "y1": (torch.special.bessel_y1, [torch.cat([_span(1e-3, 40), torch.tensor([1e-6, 8.0, 1e4, 0.0, -1.0])])]),
    "cyl_bessel_i0": (torch.special.modified_bessel_i0, [torch.cat([_span(-20, 20), torch.tensor([3.75, 80.0])])]),
    "cyl_bessel_i1": (torch.special.modified_bessel_i1, [torch.cat([_span(-20, 20), torch.tensor([3.75, -80.0])])]),
}


def test_every_cpu_form_has_its_case_here():
    assert {n.removeprefix(libdevice.PREFIX) for n in libdevice.forms() if n.startswith(libdevice.PREFIX)} == \
        set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_cpu_form_agrees_with_torch_on_the_interpreter(name):
    """Within 2e-6 of torch's result relative to it (fp32 has 6e-8; plus ABSOLUTE's), NaN where torch gives NaN,
    same infinities; exactly, where the result is an integer or a bit of the argument."""
    reference, args = CASES[name]
    want = reference(*args)
    got = _on_interpreter(name, args, want.dtype)
    if not want.is_floating_point():
        assert torch.equal(got, want)
        return
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got[got.isinf()], want[want.isinf()])
    finite = want.isfinite()
    exact = reference(*[a.double() if a.is_floating_point() else a for a in args])[finite]  # torch in fp64
    error = (got[finite].double() - exact).abs()
    assert (error <= 2e-6 * exact.abs() + ABSOLUTE.get(name, 1e-37)).all(), \
        (name, float((error / exact.abs()).nan_to_num().max()))


def test_every_libdevice_function_inductor_writes_runs_on_the_interpreter():
    """Inductor's own source: each ``libdevice.NAME(`` it writes is a tl function or has a CPU form."""
    root = Path(torch._inductor.__file__).parent
    written = {name for path in root.rglob("*.py")
               for name in re.findall(r"libdevice\.([a-z_0-9]+)\(", path.read_text(errors="replace"))}
    written -= {"is_file"}  # a path check in Inductor, not a libdevice call
    assert written, "Inductor's source names no libdevice function: the pattern needs updating"
    with_form = {n.removeprefix(libdevice.PREFIX) for n in libdevice.forms()}
    assert written - set(LIBDEVICE_AS_TL) - with_form == set()


def test_a_kernel_calling_a_libdevice_function_with_no_cpu_form_is_refused_by_name():
    name = "rcbrt"  # in libdevice, with no CPU form: Inductor does not write it (a later version might)
    kernel = ast.parse(f"def triton_poi_0(x):\n    return libdevice.{name}(x)\n").body[0]
    with pytest.raises(SeedError, match=rf"kernel triton_poi_0 calls libdevice\.{name}, which Triton's interpreter "
                                        r"cannot run .*problem\.seed=PATH"):
        libdevice.for_interpreter(kernel)


def test_the_forms_a_kernel_calls_come_with_those_they_call_and_no_others():
    kernel = ast.parse("def triton_poi_0(x, y):\n    return libdevice.tanh(x) + libdevice.asin(y)\n").body[0]
    called = libdevice.forms_called([libdevice.for_interpreter(kernel)])
    assert list(called) == ["cpu_expm1", "cpu_tanh", "cpu_atan", "cpu_signbit", "cpu_atan2", "cpu_asin"]
    assert ast.unparse(kernel.body[0]) == "return cpu_tanh(x) + cpu_asin(y)"


def test_a_seed_of_activations_calling_libdevice_is_a_correct_candidate_on_the_interpreter(sandbox):
    """Softplus (log1p), ELU and SELU (expm1), tanh, asinh, atan in one Inductor kernel: KernelBench level1/27, 29
    and 31's seeds call the same functions."""
    spec = resolve_problem(str(PROBLEMS / "libdevice_activations.py"))
    source = convert(seeds.capture(spec, "cpu"), Path(spec.path).read_text(), "libdevice_activations")
    assert "libdevice." not in source  # every call a CPU form
    assert {"cpu_log1p", "cpu_expm1", "cpu_tanh", "cpu_asinh", "cpu_atan"} <= set(re.findall(r"def (cpu_\w+)", source))
    with make_evaluator(problem=str(spec.path), sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_inductors_helpers_that_call_libdevice_are_written_as_tl_or_named():
    kernel = ast.parse("def triton_per_0(x):\n    return triton_helpers.exp(x - 1.0, False)\n").body[0]
    assert ast.unparse(libdevice.for_interpreter(kernel).body[0]) == "return tl.exp(x - 1.0)"
    kernel = ast.parse("def triton_poi_0(x):\n    return triton_helpers.frexp(x)\n").body[0]
    with pytest.raises(SeedError, match=r"kernel triton_poi_0 calls triton_helpers\.frexp, which calls libdevice"):
        libdevice.for_interpreter(kernel)
