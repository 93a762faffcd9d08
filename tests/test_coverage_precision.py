"""The coverage trial at the policy's own precision: under a policy allowing TF32 the changed element must not turn
the allowed rounding into a failure. A huge x[r, j] makes row r's logits a multiple of W[:, j]; two weights that
differ in fp32 but round to the same 10-bit mantissa then tie, and the softmax of the rounded product splits where
the fp32 one does not (KernelBench level2/66 on an H200). A fake reduced-precision reference (the matmul's operands
rounded to 10 mantissa bits, as TF32 does) stands in for the GPU's TF32 on the CPU."""
import torch
from conftest import PROBLEMS, make_evaluator

from fitness.correctness import as_tensor_list
from fitness.coverage import USABLE, TF32Reference, coverage_trial
from fitness.policy import load_policy

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
    return [coarse(*inputs)]


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
        plain = run(coarse, [x], seed)  # on the CPU the default reduced-precision reference is skipped
        assert "failure" in plain and "did not follow" in plain["failure"], plain  # the defect: a tie fails
        assert "shrunk_for_precision" not in plain
        found = run(coarse, [x], seed, reduced=fake_tf32)
        assert "failure" not in found, found
        before, after = found["shrunk_for_precision"]["x"]
        assert after < before / 5  # shrunk, and the move is still worth covering
        assert USABLE <= found["inputs"]["x"] and found["not_covered"] == []
        # the trial still bites at the shrunk amount: a kernel that skips the changed element's column of x fails
        skipped = run(lambda x: coarse(x * (torch.arange(x.shape[1]) != _changed_column(seed, x))), [x], seed,
                      reduced=fake_tf32)
        assert "failure" in skipped, skipped


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
        return as_tensor_list(ref(*inputs))

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

    found = run(candidate, [torch.randn(4, 32)], 0, reduced=lambda ref, inputs, policy: [ref(*inputs) + 1.0])
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
        return [ref(*inputs) + (1.0 if column == first else 0.0)]

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
    (tf32,) = TF32Reference()(model, [x], POLICY)
    assert torch.equal(tf32, torch.nn.functional.linear(round10(x), round10(weight), round10(model.bias)))
    assert not torch.equal(tf32, model(x)) and torch.equal(model.weight, weight)  # the judge's reference untouched
    assert TF32Reference()(model, [x], load_policy("strict-fp32")) is None  # no TF32: the fp32 reference itself


def test_the_job_says_whether_the_reference_has_matmuls_so_a_matmul_free_one_gets_no_second_reference(sandbox):
    """Only matmuls round differently under TF32: a reference without them (FLOPs counted: none) gets no reference
    at the policy's precision, nor the full-size rounded copies of its inputs that one would make."""
    with make_evaluator(sandbox=sandbox) as ev:  # scale_shift: elementwise
        assert ev._job("candidate").reference_matmuls is False
    with make_evaluator(str(PROBLEMS / "gemm_sum.py"), sandbox=sandbox) as ev:
        assert ev._job("candidate").reference_matmuls is True
