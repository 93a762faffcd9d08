"""Each cheat that has fooled published evaluators, caught by the guard meant for it (CPU interpreter)."""
import json

import pytest

from conftest import DEVICE, PROBLEMS, candidate, make_evaluator
from fitness.problems.problem import resolve_problem


@pytest.fixture(scope="module")
def evaluator(sandbox):
    """conftest's evaluator, its jobs in the pytest worker's sandbox (no fork server of its own; a hung or crashed
    candidate's worker is killed alone, the fork server goes on)."""
    with make_evaluator(sandbox=sandbox) as ev:
        yield ev

# (candidate file or source, the verdict, what its reason names): each cheat caught by its guard, each broken
# candidate judged for what it is
VERDICTS = [
    ("uninitialized_output", "incorrect", []),  # the CUDA caching allocator's stale memory, on the interpreter too
    ("zeroes_input", "rejected", ["modified its input"]),
    ("side_stream", "rejected", ["line 19: 'torch.cuda.Stream' is not allowed", "line 23: 'torch.cuda.stream'"]),
    ("patch_timer", "rejected", ["import of 'time'", "line 7: assignment into module 'time'",
                                 "line 8: assignment into module 'torch'"]),
    ("nan_output", "incorrect", ["NaN"]),
    # issue 63: a global nn.Module hook runs inside the reference (at runtime: tests/fitness/test_judge_integrity.py)
    ("global_forward_hook", "rejected", ["'.register_module_forward_hook' is not allowed"]),
    ("registration_hook", "rejected", ["'.register_module_parameter_registration_hook' is not allowed"]),
    ("compile_error", "compile_error", ["undefined_thing"]),
    ("class ModelNew(:\n    pass\n", "compile_error", ["line 1"]),  # a syntax error
    ("import torch\n", "compile_error", ["ModelNew"]),  # no ModelNew
]


def test_correct_candidate_passes_every_trial(evaluator):
    result = evaluator.evaluate(candidate("good"))
    assert result.status == "ok", result.reason
    assert result.trials_passed == 3
    assert result.max_abs_err < 1e-5
    assert result.guards["triton_launches"] >= 1
    assert result.guards["torch_compute_ops"] == []
    assert result.timer == "interpreter" and result.time_s > 0
    assert result.speedup_vs_eager is None  # interpreter times are never compared with torch
    assert result.policy["name"] == "triton"


@pytest.mark.parametrize("name, status, named", VERDICTS, ids=[v[0].split("\n")[0][:20] for v in VERDICTS])
def test_a_wrong_or_cheating_candidate_gets_its_verdict_naming_the_cause(evaluator, name, status, named):
    result = evaluator.evaluate(candidate(name) if name.isidentifier() else name)
    assert result.status == status, result.reason
    assert [text for text in named if text not in result.reason] == []


def test_wrong_kernel_is_incorrect(evaluator):
    result = evaluator.evaluate(candidate("wrong_math"))
    assert result.status == "incorrect"
    assert "exceed atol" in result.reason and result.max_abs_err > 0.5


@pytest.mark.skipif(DEVICE == "cpu", reason="every call gets new input tensors, the last call's freed first (issue "
                    "63); the CPU's allocator then hands out a new address each time: such a cache never hits there")
def test_result_cached_by_input_pointer_goes_stale(evaluator):
    result = evaluator.evaluate(candidate("pointer_cache"))
    assert result.status == "incorrect"  # right on the first inputs it saw, stale where the allocator repeats one


def test_a_load_state_dict_that_zeroes_what_it_is_handed_zeroes_only_copies(sandbox):
    """Handed the reference's live state_dict, it zeroed the reference's weight and its zeros agreed (issue 63)."""
    with make_evaluator(str(PROBLEMS / "gemm_sum.py"), trials=1, coverage=False, sandbox=sandbox) as ev:
        result = ev.evaluate(candidate("state_dict_zeroes"))
    assert result.status == "incorrect" and result.reason.startswith("trial 1"), result.reason


def test_torch_compute_behind_a_decorative_kernel_is_rejected(evaluator):
    result = evaluator.evaluate(candidate("torch_compute"))
    assert result.status == "rejected"
    assert "torch ops" in result.reason and "mul" in result.reason
    assert result.guards["triton_launches"] == 1


def test_torch_compute_inside_a_launchs_grid_or_pre_run_hook_is_traced(evaluator):
    """Triton calls a callable grid and a kernel's pre-run hooks inside the launch, whose own ops the trace ignores:
    a torch computation there was invisible (issue 63). A pre-run hook is refused statically too."""
    honest = evaluator.evaluate(candidate("lambda_grid"))
    assert honest.status == "ok" and honest.guards["torch_compute_ops"] == [], honest.reason
    for name in ("grid_compute", "autotune_hook_compute"):  # an autotuner's config hooks run outside the launch
        hidden = evaluator.evaluate(candidate(name))
        assert hidden.status == "rejected" and "torch ops ['add', 'mul']" in hidden.reason, (name, hidden.reason)
    assert "'.add_pre_run_hook' is not allowed" in evaluator.evaluate(candidate("pre_run_hook_compute")).reason
    with make_evaluator(static_check=False, sandbox=evaluator.sandbox) as ev:
        in_hook = ev.evaluate(candidate("pre_run_hook_compute"))
    assert in_hook.status == "rejected" and "torch ops ['add', 'mul']" in in_hook.reason, in_hook.reason


def test_kernelbench_policy_allows_torch_compute_but_labels_it(evaluator):
    with make_evaluator(policy="kernelbench", sandbox=evaluator.sandbox) as ev:
        result = ev.evaluate(candidate("torch_compute"))
    assert result.status == "ok", result.reason
    assert "uses-torch-compute" in result.label
    assert "mul" in result.guards["torch_compute_ops"]
    assert result.policy["name"] == "kernelbench"


def test_no_triton_kernel_is_rejected_even_when_torch_compute_is_allowed(evaluator):
    with make_evaluator(policy="kernelbench", sandbox=evaluator.sandbox) as ev:
        result = ev.evaluate(candidate("no_kernel"))
    assert result.status == "rejected"
    assert "no Triton kernel" in result.reason


def test_a_result_cached_by_input_content_never_hits_when_timed(evaluator):
    result = evaluator.evaluate(candidate("content_cache"))
    assert result.status == "ok", result.reason  # right, and timed computing: every timed call got a fresh draw
    assert result.guards["timed_calls"] >= 4 and result.guards["timed_outputs_checked"] == [0, 1, 2]
    assert result.phases_s["timed_inputs"] > 0  # the draws' cost, outside the timed region
    # that it would have hit on the old rotated sets, and never hits now: tests/fitness/test_timed_inputs.py


def test_fp16_operands_of_an_fp32_problem_are_refused_unless_the_policy_is_kernelbenchs(evaluator):
    """fp16 rounding passed policy triton's 1e-2 on a draw that stays in fp16's range (issue 63): refused in the
    source now (fitness/judge/precision_check.py), under strict-fp32 as under triton."""
    default = evaluator.evaluate(candidate("low_precision"))
    assert default.status == "rejected" and "'triton.language.float16' is not allowed under policy 'triton'" in \
        default.reason, default.reason
    with make_evaluator(policy="kernelbench", sandbox=evaluator.sandbox) as ev:
        loose = ev.evaluate(candidate("low_precision"))
    with make_evaluator(policy="strict-fp32", sandbox=evaluator.sandbox) as ev:
        strict = ev.evaluate(candidate("low_precision"))
        exact = ev.evaluate(candidate("good"))
    assert loose.status == "ok", loose.reason
    assert strict.status == "rejected" and strict.policy["name"] == "strict-fp32"
    assert exact.status == "ok", exact.reason


def test_strict_fp32_refuses_a_tf32_dot_that_the_interpreter_computes_in_fp32(sandbox):
    """The interpreter computes tl.dot in fp32 whatever its precision: a TF32 GEMM passed strict-fp32 there."""
    seed = resolve_problem("matmul").seed_source()
    sizes = {"M": 16, "N": 16, "K": 16}
    with make_evaluator("matmul", policy="strict-fp32", sizes=sizes, trials=1, sandbox=sandbox) as ev:
        tf32 = ev.evaluate(seed)
        ieee = ev.evaluate(seed.replace("tl.dot(a, b)", "tl.dot(a, b, input_precision=\"ieee\")"))
    with make_evaluator("matmul", sizes=sizes, trials=1, sandbox=sandbox) as ev:
        under_triton = ev.evaluate(seed)
    assert tf32.status == "rejected" and "tl.dot without input_precision" in tf32.reason, tf32.reason
    assert ieee.status == "ok", ieee.reason
    assert under_triton.status == "ok", under_triton.reason  # TF32 is what policy triton allows


def test_hang_times_out_and_the_next_evaluation_works(evaluator):
    with make_evaluator(timeout_s=8, sandbox=evaluator.sandbox) as ev:
        hung = ev.evaluate(candidate("hang"))
        after = ev.evaluate(candidate("good"))
    assert hung.status == "timeout" and "8 s" in hung.reason
    # the reason says what was running and at which sizes, not only "hang?"
    assert "while correctness trial 1/3" in hung.reason and "batch_size=4, dim=100" in hung.reason
    if DEVICE == "cpu":
        assert "CPU interpreter" in hung.reason and "problem.sizes.NAME=N" in hung.reason
    assert after.status == "ok", after.reason


def test_segfault_is_crashed_and_the_next_evaluation_works(evaluator):
    crashed = evaluator.evaluate(candidate("segfault"))
    assert crashed.status == "crashed"
    assert "SIGSEGV" in crashed.reason
    assert evaluator.evaluate(candidate("good")).status == "ok"


def test_os_exit_is_rejected_statically_and_crashed_without_the_static_check(evaluator):
    static = evaluator.evaluate(candidate("os_exit"))
    assert static.status == "rejected" and "import of 'os'" in static.reason
    with make_evaluator(static_check=False, sandbox=evaluator.sandbox) as ev:
        unchecked = ev.evaluate(candidate("os_exit"))
    assert unchecked.status == "crashed"
    assert "exited with code 0" in unchecked.reason


def test_secrets_of_the_parent_are_invisible_to_the_candidate(monkeypatch):
    # a sandbox of its own: a sandbox's workers get the environment it started with
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-candidates")
    monkeypatch.setenv("MY_DB_PASSWORD", "hunter2")
    monkeypatch.setenv("KERNELEVO_PLAIN_FLAG", "visible")
    with make_evaluator(static_check=False) as ev:
        result = ev.evaluate(candidate("reads_secret"))
    assert result.status == "runtime_error"
    assert "'KERNELEVO_PLAIN_FLAG': 'visible'" in result.reason  # the environment does reach the candidate ...
    assert "'OPENAI_API_KEY': None" in result.reason and "'MY_DB_PASSWORD': None" in result.reason  # ... minus secrets
    assert "sk-test" not in result.to_json() and "hunter2" not in result.to_json()


def test_result_record_is_json_with_every_field(evaluator):
    data = json.loads(evaluator.evaluate(candidate("good")).to_json())
    for key in ("status", "reason", "policy", "max_abs_err", "max_rel_err", "time_s", "speedup_vs_eager",
                "speedup_vs_compile", "sol_fraction", "eval_wall_s", "timing", "guards", "cost"):
        assert key in data
    assert data["timing"]["candidate"]["timer"] == "interpreter"
    assert data["cost"]["bytes"] == 2 * 4 * 100 * 4  # one fp32 input read, one output written
