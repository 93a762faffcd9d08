"""A policy's operands for fp32 problems, checked in the source (fitness/judge/precision_check.py): fp16 / bf16 / fp8
refused under `triton` and `strict-fp32`, a tl.dot not in IEEE fp32 under `strict-fp32` (Triton's CPU interpreter
computes every dot product in fp32, so running a TF32 kernel there tells nothing); TF32 and exact kernels pass."""
import pytest

from fitness.comparison.policy import load_policy
from fitness.judge.precision_check import precision_findings
from fitness.problems.problem import resolve_problem, suite_names

TRITON, STRICT, KERNELBENCH = (load_policy(name) for name in ("triton", "strict-fp32", "kernelbench"))
HEAD = "import torch\nimport triton\nimport triton.language as tl\n"


def found(body: str, policy=TRITON) -> list[str]:
    return [str(f) for f in precision_findings(HEAD + body, policy)]


@pytest.mark.parametrize("body, expected", [
    ("y = x.to(tl.float16)", "line 4: 'triton.language.float16' is not allowed under policy 'triton' for an fp32"),
    ("y = tl.cast(x, tl.bfloat16)", "line 4: 'triton.language.bfloat16' is not allowed"),
    ("y = x.to(tl.float8e4nv)", "'triton.language.float8e4nv' is not allowed"),
    ("y = x.half()", "line 4: '.half()' is not allowed under policy 'triton' for an fp32 problem (a cast to fp16"),
    ("y = x.bfloat16()", "'.bfloat16()' is not allowed"),
    ("y = torch.empty(4, dtype=torch.float16)", "'torch.float16' is not allowed"),
    ("LOW = tl.float16\ny = x.to(LOW)", "line 4: 'triton.language.float16' is not allowed"),
    ("from triton.language import bfloat16\ny = x.to(bfloat16)", "line 5: 'triton.language.bfloat16'"),
])
def test_narrow_operands_are_refused_for_an_fp32_problem(body, expected):
    assert any(expected in f for f in found(body)), found(body)
    assert found(body, KERNELBENCH) == []  # KernelBench's rules: any precision within the tolerances


def test_comparing_with_a_narrow_dtype_is_no_cast_and_tf32_dots_pass_under_triton():
    assert found("up = x.dtype == torch.bfloat16 or x.dtype in (torch.float16, torch.half)") == []
    assert found("c = tl.dot(a, b)\nd = tl.dot(a, b, input_precision='tf32')") == []


@pytest.mark.parametrize("body", [
    "c = tl.dot(a, b)",
    "c = tl.dot(a, b, input_precision='tf32')",
    "c = tl.dot(a, b, allow_tf32=True)",
    "def k(a, b, PRECISION: tl.constexpr):\n    return tl.dot(a, b, input_precision=PRECISION)",  # the caller's
    "P = 'ieee'\nP = 'tf32'\nc = tl.dot(a, b, input_precision=P)",  # bound twice
    "P = 'ieee'\ndef k(a, b, P):\n    return tl.dot(a, b, input_precision=P)",  # a parameter shadows the constant
])
def test_strict_fp32_refuses_a_dot_that_is_not_ieee(body):
    assert any("tl.dot without input_precision=\"ieee\" (or allow_tf32=False) is not allowed under policy "
               "'strict-fp32'" in f for f in found(body, STRICT)), found(body, STRICT)


@pytest.mark.parametrize("body", [
    "c = tl.dot(a, b, input_precision='ieee')",
    "c = tl.dot(a, b, acc, allow_tf32=False)",
    "P = 'ieee'\ndef k(a, b):\n    return tl.dot(a, b, input_precision=P)",
    "def k(a, b):\n    ALLOW_TF32 : tl.constexpr = False\n    return tl.dot(a, b, allow_tf32=ALLOW_TF32)",  # Inductor's
])
def test_strict_fp32_lets_ieee_dots_through(body):
    assert found(body, STRICT) == []


@pytest.mark.parametrize("name", suite_names())
def test_bundled_seeds_pass_under_triton(name):
    assert precision_findings(resolve_problem(name).seed_source(), TRITON) == []
