"""Each element's own rounding (fitness/judge/rounding.py ``perturbed_spread``): where a few elements of ordinary
magnitude are small differences of huge terms (KernelBench level3/49's exponentials of cumulative sums, here
tests/problems/ssd_final_state.py at small sizes), an honest reordering of the algebra misses both the plain
comparison and the magnitude classes' allowance, and passes within K x the reference's spread under rounding-sized
perturbations of its inputs and weights; a kernel with a wrong parameter, or scaled by 1.02, still fails (CPU)."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import PROBLEMS
from fitness.comparison.correctness import compare_outputs
from fitness.comparison.policy import load_policy
from fitness.judge.rounding import RoundingAllowance, compare_with_allowance, perturbed_spread
from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem

K = 8.0
SEEDS = range(8)  # seeds 5 and 7 give an element the magnitude classes' allowance misses (4 of the first 16 do)


def honest(model, x):
    """The problem's algebra in another order: cumulative sums as triangular matmuls, B times the decay first."""
    b, length, h, p = x.shape
    c, n = length // model.block_len, model.block_len
    a = model.A.reshape(b, c, n, h).permute(0, 3, 1, 2) @ torch.triu(torch.ones(n, n))
    decay = torch.exp(a[..., -1:] - a).permute(0, 2, 3, 1)[..., None]
    states = torch.einsum("bclhn,bclhp->bchpn", model.B.reshape(b, c, n, h, -1) * decay, x.reshape(b, c, n, h, p))
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    last = F.pad(a[..., -1], (1, 0)) @ torch.triu(torch.ones(c + 1, c + 1))
    below = torch.tril(torch.ones(c + 1, c + 1, dtype=torch.bool))
    segsum = (last[..., :, None] - last[..., None, :]).masked_fill(~below, -torch.inf)
    return torch.einsum("bhzc,bchpn->bzhpn", torch.exp(segsum), states)[:, -1]


def cases():
    """Per seed: (the reference, its input, its fp32 output, the float64 one, the honest reordering's output)."""
    problem = load_problem(resolve_problem(str(PROBLEMS / "ssd_final_state.py")))
    for seed in SEEDS:
        torch.manual_seed(seed)
        model = problem.Model(*call_get_init_inputs(problem))
        (x,) = problem.get_inputs()
        with torch.no_grad():
            yield model, x, model(x), copy.deepcopy(model).double()(x.double()), honest(model, x)


@pytest.mark.slow
def test_an_honest_reordering_of_cancelling_exponentials_passes_within_each_elements_own_rounding():
    tol, missed = load_policy("triton").tolerance_for(torch.float32), 0
    for model, x, ref, exact, out in cases():
        spread = perturbed_spread(model, [x])[0]
        assert spread.shape == ref.shape and spread.dtype == torch.float32
        by_class = compare_with_allowance(out, ref, exact, tol, K)[0]
        if not by_class.ok:
            missed += 1
            assert "elements exceed" in by_class.reason and "or its own spread" not in by_class.reason
        assert compare_with_allowance(out, ref, exact, tol, K, spread=spread)[0].ok
        wrong = copy.deepcopy(model)
        with torch.no_grad():
            wrong.A.mul_(1 + 1e-4)  # a parameter off by 1e-4: hundreds of times the spread where it matters
            for bad in (wrong(x), out * 1.02):
                failed = compare_with_allowance(bad, ref, exact, tol, K, spread=spread)[0]
                assert not failed.ok and "or its own spread" in failed.reason
    assert missed  # the case the spread is for: elements the magnitude classes' allowance misses


def test_the_second_opinion_falls_back_to_the_spread_only_where_the_classes_miss_and_records_the_pass():
    policy = load_policy("triton")
    model, x, ref, exact, out = next((c for c in cases() if not compare_with_allowance(
        c[4], c[2], c[3], policy.tolerance_for(torch.float32), K)[0].ok))
    saved = x.clone()
    allowance = RoundingAllowance(model, policy, K)
    plain = compare_outputs(out, [ref], policy)
    assert not plain.ok
    judged = allowance.judge(plain, out, [ref], [x], "trial 1")
    assert judged.ok and allowance.passed == ["trial 1"] and "each element's spread" in allowance.note()
    failed = compare_outputs(out * 1.02, [ref], policy)
    judged = allowance.judge(failed, out * 1.02, [ref], [x], "trial 2")
    assert not judged.ok and "or each element's own spread under rounding-sized perturbations" in judged.reason
    assert torch.equal(x, saved) and torch.equal(model(x), ref)  # inputs and weights left as they were


def test_a_forward_that_draws_random_numbers_spreads_by_its_rounding_only():
    class Noisy(nn.Module):  # dropout in training mode: a different mask each call, unless the seed is the same
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(64, 64)

        def forward(self, x):
            return F.dropout(self.linear(x), p=0.5, training=True)

    torch.manual_seed(0)
    model, x = Noisy(), torch.randn(32, 64)
    with torch.no_grad():
        out = model(x)
        spread = perturbed_spread(model, [x])[0]
    assert 0 < float(spread.max()) < 1e-5 * float(out.abs().max())  # masks alike: rounding-sized, not O(1)


def test_the_spread_leaves_the_saved_inputs_as_they_were_when_an_output_is_an_input():
    class PassThrough(nn.Module):  # returns its input itself beside a product: the spread's copies are scrubbed
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.full((4,), 3.0))

        def forward(self, x, index):
            return x, x * self.scale, index

    x, index = torch.randn(5, 4), torch.arange(5)
    saved = [x.clone(), index.clone()]
    spread = perturbed_spread(PassThrough(), [x, index])
    assert torch.equal(x, saved[0]) and torch.equal(index, saved[1])
    assert [s.shape for s in spread] == [(5, 4), (5, 4), (5,)] and float(spread[2].max()) == 0.0
    assert 0 < float(spread[1].max()) < 1e-5  # 16 u of 3 x and of x: rounding-sized
