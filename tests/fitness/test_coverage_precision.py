"""The coverage trial at the policy's own precision: under a policy allowing TF32 the changed element must not turn
the allowed rounding into a failure. A huge x[r, j] makes row r's logits a multiple of W[:, j]; two weights that
differ in fp32 but round to the same 10-bit mantissa then tie, and the softmax of the rounded product splits where
the fp32 one does not (KernelBench level2/66 on an H200). A fake reduced-precision reference (the matmul's operands
rounded to 10 mantissa bits, as TF32 does) stands in for the GPU's TF32 on the CPU."""
import pytest
import torch
from conftest import PROBLEMS, make_evaluator

from fitness.comparison.correctness import as_tensor_list, compare_outputs
from fitness.judge.coverage import ENOUGH, USABLE, TF32Reference, coverage_trial
from fitness.judge.tf32 import no_reduced_reference
from fitness.comparison.policy import load_policy

POLICY = load_policy("triton")


def round10(t: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to 10 mantissa bits (TF32's), to nearest."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & -0x2000).view(torch.float32)


def weights(columns: int = 32, rows: int = 64) -> torch.Tensor:
    """Weights whose two largest and two smallest in every column differ by 2**-13 relative: distinct in fp32, one
    value in TF32, so whatever element of x grows and whichever way, the top two logits tie when rounded."""
    torch.manual_seed(1)
    w = torch.rand(rows, columns) * 0.1 - 0.05
    top = round10(0.1 + 0.05 * torch.rand(columns))
    w[0], w[1], w[2], w[3] = top, top * (1 + 2 ** -13), -top, -top * (1 + 2 ** -13)
    assert torch.equal(round10(w[0]), round10(w[1])) and not torch.equal(w[0], w[1])
    return w


W = weights()


def reference(x):
    return torch.softmax(x @ W.T, dim=-1)


def coarse(x):
    """The honest kernel at the policy's precision: the matmul's operands in TF32, accumulated in fp32."""
    return torch.softmax(round10(x) @ round10(W).T, dim=-1)


def fake_tf32(ref, inputs, policy):
    return [[coarse(*inputs)]]  # one precision, its one output


def run(judged, inputs, seed, ref=reference, **kwargs) -> dict:
    """The coverage trial on copies of `inputs` with `judged` (torch) in place of a candidate, under `triton`."""
    def judged_call(buffers, saved, where, name=""):
        return judged(*buffers)
    names = ["x"] if len(inputs) == 1 else ["predictions", "targets"]
    return coverage_trial(ref, judged_call, [x.clone() for x in inputs], None, names, POLICY,
                          torch.Generator().manual_seed(seed), lambda b: [x.clone() for x in b], **kwargs)


def test_the_honest_coarse_kernel_passes_once_the_amount_is_shrunk_for_the_policy_s_precision():
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    for seed in range(5):
        plain = run(coarse, [x], seed, reduced=no_reduced_reference)  # no reference at the policy's precision
        assert "failure" in plain and "did not follow" in plain["failure"], plain  # the defect: a tie fails
        assert "shrunk_for_precision" not in plain
        emulated = run(coarse, [x], seed)  # the default emulation rounds x @ W.T's operands, W a global here too
        assert "failure" not in emulated and "x" in emulated["shrunk_for_precision"], emulated
        found = run(coarse, [x], seed, reduced=fake_tf32)
        assert "failure" not in found, found
        before, after = found["shrunk_for_precision"]["x"]
        assert after < before / 5  # shrunk, and the move is still worth covering
        assert USABLE <= found["inputs"]["x"] and found["not_covered"] == []
        # the trial still bites at the shrunk amount: a kernel that skips the changed element's column of x fails
        skipped = run(skipping_the_changed_column(coarse, x), [x], seed, reduced=fake_tf32)
        assert "failure" in skipped, skipped


def skipping_the_changed_column(kernel, x: torch.Tensor):
    """`kernel` with the column of its input holding the trial's changed element (where it differs from `x`) read as
    zeros: a kernel skipping that column."""
    def skipping(changed):
        column = (changed != x).any(0)
        return kernel(changed * ~column)
    return skipping


def _changed_column(seed: int, x: torch.Tensor) -> int:
    """The column of x the trial changes for `seed` (its first element tried)."""
    return int(torch.randint(x.numel(), (1,), generator=torch.Generator().manual_seed(seed))) % x.shape[1]


def _mse(p, t):
    return torch.mean((p - t) ** 2)


def test_a_rescaled_subsample_of_a_loss_is_rejected_exactly_as_before():
    """MSE has no matmul: its reference at the policy's precision is the fp32 one, so nothing is shrunk and a kernel
    doing 99/100 of the work fails with the same message as without the reduced-precision reference."""
    torch.manual_seed(3)
    p, t = torch.rand(300, 64), torch.rand(300, 64)

    def subsample(p, t):
        rows = torch.arange(p.shape[0]) % 100 != 0
        return _mse(p[rows], t[rows])

    def same(ref, inputs, policy):
        return [as_tensor_list(ref(*inputs))]

    for seed in range(3):
        before = run(subsample, [p, t], seed, ref=_mse)
        after = run(subsample, [p, t], seed, ref=_mse, reduced=same)
        assert "failure" in before and after == before
        assert "shrunk_for_precision" not in after and after["inputs"]["predictions"] >= 2e4
        assert "failure" not in run(_mse, [p, t], seed, ref=_mse, reduced=same)


def test_an_input_no_amount_passes_for_at_the_policy_s_precision_is_not_covered():
    """A reduced-precision reference that never agrees with the fp32 one: the input is reported as not covered at
    the policy's precision and the candidate is neither run on it nor failed."""
    torch.manual_seed(0)
    calls = []

    def candidate(x):
        calls.append(x)
        return coarse(x)

    found = run(candidate, [torch.randn(4, 32)], 0, reduced=lambda ref, inputs, policy: [[ref(*inputs) + 1.0]])
    assert found["not_covered"] == ["x"] and found["not_covered_at_precision"] == ["x"]
    assert "failure" not in found and found["inputs"] == {} and calls == []


def test_another_element_is_tried_where_no_amount_of_the_first_passes_at_the_policy_s_precision():
    """A reduced-precision reference disagreeing only while the first element tried is changed (a column whose
    weights lie closer than TF32 resolves): the trial moves on to another element and covers the input there."""
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    first = _changed_column(0, x)
    calls = []

    def only_first_disagrees(ref, inputs, policy):
        column = int((inputs[0] != x).nonzero()[0, 1])
        calls.append(column)
        return [[ref(*inputs) + (1.0 if column == first else 0.0)]]

    def candidate(x):
        calls.append("candidate")
        return reference(x)

    found = run(candidate, [x], 0, reduced=only_first_disagrees)
    assert "failure" not in found and found["not_covered"] == [] and found["inputs"]["x"] >= USABLE
    assert "shrunk_for_precision" not in found and "not_covered_at_precision" not in found
    assert calls[0] == first and calls[-2] != first and calls[-1] == "candidate"


def test_the_default_reduced_precision_reference_rounds_inputs_and_weights_to_tf32_under_a_tf32_policy():
    torch.manual_seed(0)
    model, x = torch.nn.Linear(32, 8), torch.randn(4, 32)
    weight = model.weight.detach().clone()
    (nearest,), (toward_zero,) = TF32Reference()(model, [x], POLICY)
    assert torch.equal(nearest, torch.nn.functional.linear(round10(x), round10(weight), round10(model.bias)))
    truncated = torch.nn.functional.linear(truncated10(x), truncated10(weight), truncated10(model.bias))
    assert torch.equal(toward_zero, truncated) and not torch.equal(nearest, toward_zero)
    assert not torch.equal(nearest, model(x)) and torch.equal(model.weight, weight)  # the judge's reference untouched
    assert TF32Reference()(model, [x], load_policy("strict-fp32")) is None  # no TF32: the fp32 reference itself


def test_the_job_says_whether_the_reference_has_matmuls_so_a_matmul_free_one_gets_no_second_reference(sandbox):
    """Only matmuls round differently under TF32: a reference without them (FLOPs counted: none) gets no reference
    at the policy's precision, nor the full-size rounded copies of its inputs that one would make."""
    with make_evaluator(sandbox=sandbox) as ev:  # scale_shift: elementwise
        assert ev._job("candidate").reference_matmuls is False
    with make_evaluator(str(PROBLEMS / "gemm_sum.py"), sandbox=sandbox) as ev:
        assert ev._job("candidate").reference_matmuls is True


def _with_low_bits(t: torch.Tensor, low: int) -> torch.Tensor:
    return (t.contiguous().view(torch.int32) | low).view(torch.float32)


def truncated10(t: torch.Tensor) -> torch.Tensor:
    """fp32 values at 10 mantissa bits, toward zero (what a Triton TF32 dot on Hopper reads of its fp32 operands)."""
    return (t.contiguous().view(torch.int32) & -0x2000).view(torch.float32)


class SoftmaxLinear(torch.nn.Module):
    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)

    def forward(self, x):
        return torch.softmax(x @ self.weight.T, dim=-1)


@pytest.mark.slow
def test_weights_that_tie_only_when_truncated_to_tf32_do_not_fail_an_honest_truncating_kernel():
    """Level2/66 on an H200: with the TF32 reference rounding to nearest only, one position in two still failed the
    seed. Weights whose low bits differ across TF32's rounding point (0x0800 and 0x1800 of 0x2000) stay apart when
    rounded to nearest and tie when truncated; the default reference checks both roundings, so the kernel that
    truncates passes wherever the trial changes x, while a reference rounding to nearest only lets it fail."""
    torch.manual_seed(1)
    w = torch.rand(64, 32) * 0.1 - 0.05
    top = round10(0.1 + 0.05 * torch.rand(32))
    w[0], w[1] = _with_low_bits(top, 0x0800), _with_low_bits(top, 0x1800)
    w[2], w[3] = -w[0], -w[1]
    assert torch.equal(truncated10(w[0]), truncated10(w[1])) and not torch.equal(round10(w[0]), round10(w[1]))
    model, x = SoftmaxLinear(w), torch.randn(4, 32)

    def truncating(x):
        return torch.softmax(truncated10(x) @ truncated10(w).T, dim=-1)

    def nearest_only(ref, inputs, policy):
        return [[torch.softmax(round10(inputs[0]) @ round10(w).T, dim=-1)]]

    failed_with_nearest_only = 0
    for seed in range(4):
        found = run(truncating, [x], seed, ref=model, reduced=TF32Reference())
        assert "failure" not in found and found["not_covered"] == [] and found["inputs"]["x"] >= USABLE, found
        failed_with_nearest_only += "failure" in run(truncating, [x], seed, ref=model, reduced=nearest_only)
        skipped = run(skipping_the_changed_column(truncating, x), [x], seed, ref=model, reduced=TF32Reference())
        assert "failure" in skipped, skipped  # still bites: a kernel skipping the changed column fails
    assert failed_with_nearest_only == 4


def test_the_trial_compares_elementwise_so_the_moved_row_s_allowed_rounding_is_not_measured_against_its_own_norm():
    """Level2/66 at full size: the change makes one softmax row peaked, so that row alone is the output's norm, and a
    TF32 rounding within the elementwise tolerance of its peak exceeded the normwise bound (1e-2): no amount passed at
    the policy's precision and x was not covered in 5 of 6 evaluations on an H200. The trial compares elementwise; a
    candidate off by 1.5 % at the peak (within atol + rtol x |ref|) follows the change and passes, though its
    normwise error there is over the bound; the ordinary trials keep the bound."""
    torch.manual_seed(0)
    x = torch.randn(4, 32)

    def off_at_the_peak(x):
        out = reference(x)
        return out + 0.015 * (out > 0.5)

    seen = []

    def judged(*inputs):
        out = off_at_the_peak(*inputs)
        seen.append(out.clone())  # the trial scrubs the output it was given
        return out

    for seed in range(3):
        found = run(judged, [x], seed, reduced=lambda ref, inputs, policy: [[ref(*inputs)]])
        assert "failure" not in found and found["inputs"]["x"] >= USABLE, found
        assert bool((seen[-1] > 0.5).any())  # the changed input made a peak the candidate is off at
    refs = [torch.softmax(torch.eye(4, 64) * 50, dim=-1)]  # rows peaked as under the change
    assert not compare_outputs([refs[0] + 0.015 * (refs[0] > 0.5)], refs, POLICY).ok  # the normwise bound fails it
    assert compare_outputs([refs[0] + 0.015 * (refs[0] > 0.5)], refs, POLICY, normwise=False).ok


LINEAR = torch.rand(48, 32) * 0.1 - 0.05  # x @ LINEAR.T: every column of weights moves the output


def _linear(x):
    return x @ LINEAR.T


def test_a_precision_failure_where_the_change_moves_nothing_does_not_stop_the_trial():
    """A small GEMM-then-sum problem in CI: the reference truncated to TF32 was off the fp32 one at a row of the
    output the change does not touch, whatever the amount, so x went uncovered in about 2 evaluations in 100. Only
    the output elements the change moves say whether its amount turns the allowed rounding into a failure; the
    others are an ordinary trial's concern."""
    torch.manual_seed(0)
    x = torch.randn(4, 32)

    def off_elsewhere(ref, inputs, policy):
        out = ref(*inputs).clone()
        moved = (inputs[0] != x).any(-1)
        out[~moved] += 1.0  # every row the change leaves alone, off by far more than the tolerance
        return [[out]]

    for seed in range(3):
        found = run(_linear, [x], seed, ref=_linear, reduced=off_elsewhere)
        assert "failure" not in found and found["not_covered"] == [] and found["inputs"]["x"] >= ENOUGH, found
        assert "shrunk_for_precision" not in found and "not_covered_at_precision" not in found


def test_an_element_whose_precise_amount_moves_little_is_replaced_by_one_moving_enough():
    """An element whose weights sum to nearly nothing (CI, the GEMM-then-sum problem: a column summing to 0.012)
    keeps its TF32 rounding within the tolerance only at an amount moving the output some 10 tolerances, too
    little to expose a subsample rescaled by 100/99; the trial tries another element and keeps the largest move."""
    torch.manual_seed(0)
    x = torch.randn(4, 32)
    first = _changed_column(0, x)
    tried = []

    def first_column_drifts(ref, inputs, policy):
        changed = (inputs[0] - x).abs()
        column = int(changed.sum(0).argmax())
        tried.append(column)
        drift = 1e-3 * changed.sum(-1, keepdim=True) if column == first else 0.0  # an error growing with the amount
        return [[ref(*inputs) + drift]]

    found = run(_linear, [x], 0, ref=_linear, reduced=first_column_drifts)
    assert tried[0] == first and tried[-1] != first
    assert "failure" not in found and found["inputs"]["x"] >= ENOUGH and "shrunk_for_precision" not in found, found
