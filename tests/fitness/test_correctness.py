"""Output comparison: tolerances per dtype, NaN/Inf only where the reference has them, shapes and dtypes."""
import math

import pytest
import torch

from fitness.comparison.correctness import changed_inputs, compare_outputs
from fitness.comparison.policy import Tolerance, load_policy

TRITON = load_policy("triton")
STRICT = load_policy("strict-fp32")


def test_within_tolerance_passes_and_reports_errors():
    ref = torch.linspace(-1, 1, 100)
    result = compare_outputs(ref + 1e-3, [ref], TRITON)
    assert result.ok and math.isclose(result.max_abs_err, 1e-3, rel_tol=1e-3)


def test_nan_where_the_reference_is_finite_fails():
    ref = torch.ones(10)
    out = ref.clone()
    out[3] = float("nan")
    result = compare_outputs(out, [ref], TRITON)
    assert not result.ok and "1 NaN where the reference is finite" in result.reason


def test_nan_and_inf_where_the_reference_has_them_pass():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare_outputs(ref.clone(), [ref], TRITON).ok
    flipped = torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")])
    assert not compare_outputs(flipped, [ref], TRITON).ok


def test_all_nan_output_fails_even_against_an_all_nan_comparison_bug():
    ref = torch.zeros(4)
    assert not compare_outputs(torch.full((4,), float("nan")), [ref], TRITON).ok


def test_shape_dtype_and_arity_must_match():
    ref = torch.zeros(2, 3)
    assert "shape" in compare_outputs(torch.zeros(3, 2), [ref], TRITON).reason
    assert "dtype" in compare_outputs(torch.zeros(2, 3, dtype=torch.float64), [ref], TRITON).reason
    assert "2 outputs" in compare_outputs((ref, ref), [ref], TRITON).reason
    assert "expected a torch.Tensor" in compare_outputs(3.0, [ref], TRITON).reason


def test_strict_policy_fails_tf32_sized_errors_that_the_default_accepts():
    torch.manual_seed(0)
    ref = torch.randn(256, 256)
    tf32_like = ref * (1 + 5e-4 * torch.randn_like(ref))  # ~ TF32's 10-bit mantissa
    assert compare_outputs(tf32_like, [ref], TRITON).ok
    assert not compare_outputs(tf32_like, [ref], STRICT).ok


def test_changed_inputs_are_found_bit_for_bit():
    a, b = torch.randn(5), torch.randn(5)
    saved = [a.clone(), b.clone(), 3]
    b[2] += 1e-7 if b[2] != 0 else 1.0
    assert changed_inputs([a, b, 3], saved) == [1]


def test_a_comparison_made_in_chunks_finds_the_same_errors_and_the_same_first_bad_element(monkeypatch):
    from fitness.comparison import correctness

    torch.manual_seed(0)
    ref = torch.randn(6, 10)
    out = ref.clone()
    out[3, 4] += 1.0  # element 34: in the fifth chunk of 7
    out[5, 9] += 0.5
    tol = Tolerance(atol=1e-3, rtol=1e-3, max_rel_l2=None)
    whole = correctness.compare_tensor(out, ref, tol)
    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 7)
    chunked = correctness.compare_tensor(out, ref, tol)
    assert not whole.ok and chunked.reason == whole.reason
    assert "2 of 60 elements" in chunked.reason and "first at index (3, 4)" in chunked.reason
    assert chunked.max_abs_err == pytest.approx(1.0) and chunked.rel_l2 == pytest.approx(whole.rel_l2, rel=1e-12)
    good = correctness.compare_tensor(ref + 1e-6, ref, tol)
    assert good.ok and good.max_abs_err == pytest.approx(1e-6, rel=0.1)  # fp32 rounding of ref + 1e-6
