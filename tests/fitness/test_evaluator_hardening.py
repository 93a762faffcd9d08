"""Holes an attacker's report found in the evaluator's checks, each closed: one attack candidate per hole (CPU
interpreter; the tests' evaluator runs 3 trials, then 3 + 1 timed calls on 3 input sets)."""
import pytest
import torch

from conftest import DEVICE, candidate, make_evaluator
from fitness.judge.checks import output_type_problem
from fitness.evaluation.scrub import SECRET_PLACEHOLDER, known_secrets, scrub_secrets
from kernelevo.core.evaluation_record import EvalResult


@pytest.fixture(scope="module")
def evaluator(sandbox):
    """conftest's evaluator, its jobs in the pytest worker's sandbox (no fork server of its own): these tests judge
    kernels alone."""
    with make_evaluator(sandbox=sandbox) as ev:
        yield ev


def test_a_tensor_subclass_output_is_rejected(evaluator):
    result = evaluator.evaluate(candidate("lazy_tensor_output"))
    assert result.status == "rejected"
    assert "Lazy (trial 1)" in result.reason and "plain torch.Tensor" in result.reason


def test_output_types_must_be_exact_inside_tuples_too():
    class Sub(torch.Tensor):
        pass

    plain = torch.zeros(2)
    assert output_type_problem(plain) == "" and output_type_problem((plain, plain)) == ""
    assert "output #1" in output_type_problem([plain, plain.as_subclass(Sub)])
    assert output_type_problem(torch.nn.Parameter(plain)) != ""
    assert output_type_problem(3.0) != ""


# These candidates change behaviour after a number of forward calls. On a GPU the compile pass makes forward's first
# call (fitness/judge/compile_ahead.py), so there they turn one call earlier and are caught one stage earlier.
COMPILE_PASS_CALLS = 0 if DEVICE == "cpu" else 1


def test_every_trial_is_traced_and_must_launch(evaluator):
    result = evaluator.evaluate(candidate("honest_first_call"))
    assert result.status == "rejected"
    trial = 1 - COMPILE_PASS_CALLS
    assert f"(trial {trial + 1})" in result.reason and result.trials_passed == trial  # trials counted from 1


def test_every_timed_call_must_launch_the_candidates_kernel(evaluator):
    result = evaluator.evaluate(candidate("torch_when_timed"))
    assert result.status == "rejected"
    if COMPILE_PASS_CALLS:  # turns during the differential trial's second call, the last correctness call
        assert "launched no Triton kernel of its own (differential trial" in result.reason
        assert result.trials_passed == 3
    else:
        assert "timed calls launched no Triton kernel" in result.reason
        # 3 trials, the coverage trial and the differential trial's two calls
        assert result.trials_passed == 3 and result.guards["triton_launches"] == 6


def test_a_stale_answer_in_the_timed_calls_is_incorrect(evaluator):
    result = evaluator.evaluate(candidate("stale_when_timed"))
    assert result.status == "incorrect"
    expected = "differential trial" if COMPILE_PASS_CALLS else "output of a timed call differs from the reference"
    assert expected in result.reason


def test_inputs_come_from_a_secret_seed_reported_afterwards(evaluator):
    cheat = evaluator.evaluate(candidate("predicts_inputs"))
    assert cheat.status == "incorrect"
    assert cheat.input_seed is not None and f"(input seed {cheat.input_seed})" in cheat.reason
    first, second = evaluator.evaluate(candidate("good")), evaluator.evaluate(candidate("good"))
    assert first.ok and second.ok and first.input_seed != second.input_seed
    assert first.guards["timed_outputs_checked"] == [0, 1, 2]


def test_getattr_with_a_default_and_f_pad_are_not_false_rejections(evaluator):
    for name in ("getattr_default", "pad_then_kernel"):
        result = evaluator.evaluate(candidate(name))
        assert result.status == "ok", (name, result.reason)
        assert result.guards["torch_compute_ops"] == []


SECRET = "sk-fake-hardening-0123456789"
LEAKS = f'''
import torch.nn as nn

KEY = "{SECRET}"
print("found", KEY)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        print("again", KEY)
        raise RuntimeError("the key is " + KEY)
'''


def test_secrets_are_scrubbed_from_the_result(monkeypatch, evaluator):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = evaluator.evaluate(LEAKS)
    assert result.status == "runtime_error"
    assert SECRET not in result.to_json()
    assert f"the key is {SECRET_PLACEHOLDER}" in result.reason


def test_only_secret_variables_of_eight_characters_or_more_are_scrubbed():
    env = {"MY_TOKEN": "abcdefgh12", "SHORT_KEY": "1234", "PLAIN": "abcdefgh12345"}
    assert known_secrets(env) == ["abcdefgh12"]
    result = EvalResult(status="rejected", reason="x abcdefgh12 1234", notes=["abcdefgh12"], log_tail="abcdefgh12")
    scrub_secrets(result, known_secrets(env))
    assert result.reason == f"x {SECRET_PLACEHOLDER} 1234" and result.notes == [SECRET_PLACEHOLDER]
    assert result.log_tail == SECRET_PLACEHOLDER


def test_a_softmax_within_atol_everywhere_but_wrong_as_a_whole_is_incorrect(sandbox):
    source = candidate("softmax_no_max_no_sum")
    sizes = {"batch_size": 64, "dim": 2048}  # the guess is ~3 % off (2.2-4.2 % over 1000 seeds), no element > atol
    with make_evaluator("row_softmax", sizes=sizes, trials=1, sandbox=sandbox) as ev:
        result = ev.evaluate(source)
        assert result.status == "incorrect" and "normwise relative error" in result.reason, result.reason
        assert 0.015 < result.rel_l2 < 0.1  # every element within atol=1e-2: only the normwise bound sees it
    with make_evaluator("row_softmax", policy="kernelbench", sizes=sizes, trials=1, coverage=False,
                        differential_trial=False, sandbox=sandbox) as ev:
        assert ev.evaluate(source).ok  # KernelBench's own rules (elementwise only) let it through (and the
        # differential trial off: it catches the guess too)
    with make_evaluator("row_softmax", policy="kernelbench", sizes=sizes, trials=1, sandbox=sandbox) as ev:
        result = ev.evaluate(source)  # but not the coverage trial: one large element makes the guessed sum wrong
        assert result.status == "incorrect" and result.reason.startswith("coverage trial: "), result.reason
