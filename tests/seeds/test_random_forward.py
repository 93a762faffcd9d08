"""A problem whose forward draws random numbers (KernelBench level3/35_LSTM's torch.randn initial state; here
tests/problems/random_state.py): which ATen ops count as draws, the judge seeding torch's generator alike for the
reference and the candidate (fitness/judge/randomness.py), candidates that draw other numbers or compute in torch
judged so, the converter writing Inductor's ATen random calls as torch's functions
(kernelevo/seeds/inductor/randoms.py), and the Inductor seed of the tiny problem judged correct under policy
`triton`."""
import ast
import json
from copy import deepcopy

import pytest
import torch

from conftest import PROBLEMS, make_evaluator
from fitness.judge.guards import LaunchCounter, TorchOpTrace
from fitness.judge.randomness import LABEL, is_draw, seed_alike
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor import randoms
from kernelevo.seeds.inductor.cache import cache_key, entry_file
from kernelevo.seeds.inductor.convert import CallRewriter
from kernelevo.seeds.inductor.errors import SeedError

RANDOM_STATE = str(PROBLEMS / "random_state.py")

CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_tanh(x_ptr, scale_ptr, state_ptr, out_ptr, n, FEATURES: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    value = tl.load(x_ptr + offsets, mask=mask) * tl.load(scale_ptr + offsets % FEATURES, mask=mask)
    value = value + tl.load(state_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, 2.0 * tl.sigmoid(2.0 * value) - 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features
        self.scale = nn.Parameter(torch.randn(features))
        self.kept = None

    def forward(self, x):
        STATE
        out = torch.empty_like(x)
        scale_add_tanh[(triton.cdiv(x.numel(), 128),)](x, self.scale, state, out, x.numel(),
                                                       FEATURES=self.features, BLOCK=128)
        return out
'''
DRAW = "torch.randn(x.shape[0], self.features, device=x.device)"
STATES = {
    "honest": f"state = {DRAW}",
    "another generator": "state = torch.randn(x.shape[0], self.features, device=x.device, "
                         "generator=torch.Generator(device=x.device).manual_seed(0))",
    "a constant": "state = torch.zeros(x.shape[0], self.features, device=x.device)",
    "the first call's draw kept": f"self.kept = {DRAW} if self.kept is None else self.kept\n        state = self.kept",
    "torch compute": f"state = {DRAW} + 0.0",
    "a draw the reference does not make": f"state = {DRAW}\n        noise = torch.rand(1, device=x.device)",
}


def candidate(case: str) -> str:
    return CANDIDATE.replace("STATE", STATES[case])


def test_a_draw_is_a_random_creation_op_and_only_the_references_draws_are_allowed():
    trace = TorchOpTrace(LaunchCounter())
    p = torch.full((4,), 0.5)
    with trace:
        torch.randn(2, 3)
        torch.randint(0, 5, (3,))
        torch.randn_like(p)
        torch.bernoulli(p)  # reads p: a computation, not a draw
        torch.normal(p, 1.0)  # reads its mean
    assert dict(trace.draws) == {"randn": 1, "randint": 1, "randn_like": 1}
    assert trace.compute_ops(draws_allowed={"randn"}) == ["bernoulli", "normal", "randint", "randn_like"]
    assert trace.compute_ops(draws_allowed={"randn", "randint", "bernoulli", "normal"}) == ["bernoulli", "normal",
                                                                                            "randn_like"]
    assert is_draw(torch.ops.aten.rand.default) and not is_draw(torch.ops.aten.add.Tensor)


def test_the_references_copies_are_seeded_as_the_reference_and_each_candidate_call_gets_a_new_seed():
    def model():
        torch.manual_seed(0)
        return torch.nn.Linear(3, 3)

    reference, candidate_model = model(), model()
    seeds_ = seed_alike(reference, candidate_model, {"randn"})
    copy = deepcopy(reference).double()  # the rounding allowance's float64 reference
    drawn = {}
    for name, module in (("candidate", candidate_model), ("reference", reference), ("copy", copy)):
        module.register_forward_hook(lambda m, args, out, name=name: drawn.setdefault(name, torch.randn(4)))
    candidate_model(torch.ones(3))
    first = seeds_.seed
    reference(torch.ones(3))
    copy(torch.ones(3, dtype=torch.float64))
    assert torch.equal(drawn["candidate"], drawn["reference"]) and torch.equal(drawn["reference"], drawn["copy"])
    candidate_model(torch.ones(3))
    assert seeds_.seed != first and seeds_.calls == 2
    assert seed_alike(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), set()) is None  # nothing drawn: no hooks


def rewritten(call: str) -> str:
    node = ast.parse(call, mode="eval").body
    return ast.unparse(CallRewriter({}, "arg0_1.device").visit(node))


def test_inductors_aten_random_calls_become_torchs_functions_on_the_inputs_device():
    assert rewritten("torch.ops.aten.randn.default([6, 10, 32], device=device(type='cuda', index=0), "
                     "pin_memory=False)") == "torch.randn([6, 10, 32], device=arg0_1.device)"
    assert rewritten("torch.ops.aten.randint.low(-3, 5, [4], dtype=torch.int64, device=device(type='cpu'), "
                     "pin_memory=False)") == "torch.randint(-3, 5, [4], dtype=torch.int64, device=arg0_1.device)"
    assert rewritten("torch.ops.aten.rand.default([2], generator=None, layout=torch.strided, device=device(type='cpu'))"
                     ) == "torch.rand([2], device=arg0_1.device)"
    with pytest.raises(SeedError, match="generator of its own"):
        rewritten("torch.ops.aten.rand.default([2], generator=g, device=device(type='cpu'))")
    with pytest.raises(SeedError, match="fallback_random"):  # Inductor's Philox seeds: still refused, saying why
        rewritten("aten.randint.low_out(-9223372036854775808, 9223372036854775807, [1], out=buf9)")
    forward = "class ModelNew:\n    def forward(self, x):\n        s = torch.randn([2], device=x.device)\n" \
        "        return torch.addmm(s, x, x)\n"
    assert seeds.library_calls(forward) == ["torch.addmm"]  # a draw is no library call


def test_a_cached_capture_with_inductors_own_random_numbers_is_captured_again(tmp_path, monkeypatch):
    spec = resolve_problem(RANDOM_STATE)
    entry = entry_file(tmp_path, spec, cache_key(spec, "cpu", "cpu_interpreter", dynamic=True))
    entry.parent.mkdir(parents=True)
    entry.write_text(json.dumps({"code": "def call(args):\n    aten.randint.low_out(0, 9, [1], out=buf0)\n"}))
    asked = []

    def capture_variants(spec, device, templates, tf32, missing, **kwargs):
        asked.append(sorted(missing))
        return {"default": {"error": "RuntimeError: not captured in this test"}}

    monkeypatch.setattr(seeds, "capture_variants", capture_variants)
    with pytest.raises(SeedError, match="not captured in this test"):
        seeds.inductor_seeds(spec, "cpu", "cpu_interpreter", tmp_path)
    assert asked == [["default"]]  # the stale entry was not converted: captured again


def test_the_judge_seeds_the_reference_and_the_candidate_alike_and_allows_only_the_references_draws(sandbox):
    with make_evaluator(problem=RANDOM_STATE, sandbox=sandbox, trials=2) as ev:
        results = {case: ev.correctness(candidate(case), label=case) for case in STATES if case != "honest"}
        honest = ev.evaluate(candidate("honest"), label="honest")  # timed too: its sampled calls checked alike
    assert honest.status == "ok", honest.reason
    assert honest.guards["timed_outputs_checked"]
    assert honest.guards["random_draws"] == ["randn"] and LABEL in honest.guards["labels"]
    assert honest.guards["torch_compute_ops"] == [] and any("draws random numbers" in n for n in honest.notes)
    assert LABEL in honest.label
    for case in ("another generator", "a constant", "the first call's draw kept"):
        assert results[case].status == "incorrect", (case, results[case].status, results[case].reason)
    assert results["torch compute"].status == "rejected"
    assert "torch ops ['add']" in results["torch compute"].reason
    assert results["a draw the reference does not make"].status == "rejected"
    assert "random draws the reference does not make: ['rand']" in results["a draw the reference does not make"].reason


@pytest.mark.slow
def test_the_inductor_seed_of_a_forward_drawing_random_numbers_is_judged_correct_under_policy_triton(tmp_path,
                                                                                                     sandbox):
    spec = resolve_problem(RANDOM_STATE)
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache")
    assert "torch.randn(" in source and "torch.ops" not in source and "randint" not in source
    assert randoms.NOTE.strip() in source  # its docstring says so
    assert seeds.library_calls(source) == []
    with make_evaluator(problem=RANDOM_STATE, sandbox=sandbox, trials=2) as ev:
        result = ev.correctness(source, label="inductor")
    assert result.status == "ok", result.reason
    assert result.guards["random_draws"] == ["randn"] and result.guards["torch_compute_ops"] == []
