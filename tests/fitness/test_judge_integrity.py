"""The judge is out of the candidate's reach (fitness/judge/integrity.py): whatever a candidate changes in the state the
judge relies on -- the comparison, the timer's statistics, torch modes, threads, the judge's own globals -- is found
before its outputs are compared or its time is used, and the candidate is rejected. The static check is off here:
these are what a candidate that got past it could try. Each attack passes as `ok` without the state check."""
import pytest
import torch

from conftest import PROBLEMS, SCALE_SHIFT, candidate, make_evaluator
from fitness.judge.integrity import JudgeState
from fitness.workers.sandbox import read_result

IMPORTS = "import sys\nimport threading\nimport time\nimport statistics\nimport torch\n"


def with_attack(base: str, at_import: str = "", in_forward: str = "") -> str:
    """`base` (a test candidate) with code run at import and/or at the start of every forward call."""
    source = IMPORTS + candidate(base)
    if in_forward:
        body = "".join(f"        {line}\n" for line in in_forward.strip().splitlines())
        source = source.replace("    def forward(self, x):\n", "    def forward(self, x):\n" + body, 1)
    return source + "\n" + at_import + "\n"


@pytest.fixture(scope="module")
def evaluator(sandbox):
    with make_evaluator(static_check=False, trials=2, timeout_s=60, sandbox=sandbox) as ev:
        yield ev


def rejected_for(result, what: str) -> None:
    assert result.status == "rejected", (result.status, result.reason)
    assert "changed the evaluator's own state" in result.reason and what in result.reason, result.reason


def test_replacing_the_comparison_inside_forward_is_caught_before_the_output_is_compared(evaluator):
    source = with_attack("wrong_math", in_forward="""
from fitness.comparison.correctness import Comparison
for judge in ('fitness.judge.trials', 'fitness.judge.checks'):
    sys.modules[judge].compare_outputs = lambda *args, **kwargs: Comparison(True)
""")
    rejected_for(evaluator.evaluate(source), "fitness.judge.trials.compare_outputs replaced")


def test_rebinding_the_timers_statistics_is_caught(evaluator):
    result = evaluator.evaluate(with_attack("good", at_import="statistics.median = lambda samples: 1e-9"))
    rejected_for(result, "statistics.median replaced")


def test_a_global_that_shadows_a_builtin_in_the_judge_is_caught(evaluator):
    source = with_attack("wrong_math", at_import="sys.modules['fitness.comparison.correctness'].int = lambda x: 0")
    # no element counted bad
    rejected_for(evaluator.evaluate(source), "fitness.comparison.correctness: attribute(s) added: int")


def test_a_torch_function_mode_left_on_is_caught(evaluator):
    mode = """
class PassThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
"""
    source = with_attack("good", at_import=mode, in_forward="""
if not getattr(self, 'mode', None):
    self.mode = PassThrough()
    self.mode.__enter__()
""")
    rejected_for(evaluator.evaluate(source), "torch function modes changed")


def test_a_thread_left_running_is_caught(evaluator):
    source = with_attack("good", at_import="threading.Thread(target=time.sleep, args=(30,), daemon=True).start()")
    rejected_for(evaluator.evaluate(source), "a Python thread was started")


def test_an_honest_candidate_changes_nothing_the_judge_watches(evaluator):
    result = evaluator.evaluate(with_attack("good"))
    assert result.ok, result.reason


def test_a_candidate_cannot_find_or_forge_its_result_file(evaluator, tmp_path):
    body = """
import json, os
try:
    job = json.load(open('job.json'))
    open(job['result_path'], 'w').write(json.dumps({'status': 'ok', 'reason': 'forged'}))
    os._exit(0)
except FileNotFoundError:
    raise RuntimeError('no job file: ' + ','.join(sorted(os.listdir('.'))))
"""
    result = evaluator.evaluate(candidate("good") + "\n" + body)
    assert result.status == "compile_error" and "no job file" in result.reason, result.reason
    assert "result-" not in result.reason  # the result file does not exist before the judge writes it

    forged = tmp_path / "result.json"
    forged.write_text('{"status": "ok", "token": "guessed"}')
    assert read_result(forged, "secret-token")["status"] == "rejected"
    forged.write_text('{"status": "ok", "token": "secret-token"}')
    assert read_result(forged, "secret-token") == {"status": "ok"}
    assert read_result(tmp_path / "missing.json", "secret-token") is None


def test_the_data_model_the_judge_imports_is_watched_as_strictly_as_the_judge():
    import kernelevo.core.genome
    from fitness.judge.integrity import JudgeState

    state = JudgeState.capture()
    kernelevo.core.genome.stolen = "an attribute a candidate added"
    try:
        assert "kernelevo.core.genome: attribute(s) added: stolen" in state.verify()
    finally:
        del kernelevo.core.genome.stolen
    assert not [d for d in state.verify() if d.startswith("kernelevo.core.")]


def test_a_warning_torch_raises_under_the_judges_tf32_emulation_is_no_tampering():
    # on 2 x H200 level3/40_GRUHidden's honest seeds were rejected: a torch warning raised inside TF32Operands'
    # __torch_function__ made Python add __warningregistry__ to fitness.judge.tf32's globals
    import warnings

    import torch

    import fitness.judge.tf32 as tf32
    from fitness.judge.integrity import JudgeState

    vars(tf32).pop("__warningregistry__", None)
    state = JudgeState.capture()
    with warnings.catch_warnings(record=True), tf32.TF32Operands("nearest"):
        warnings.simplefilter("always")
        torch.tensor(torch.ones(2))  # torch warns "To copy construct from a tensor ...", from the mode's frame
    assert "__warningregistry__" in vars(tf32)  # as on the H200
    assert not [d for d in state.verify() if "fitness.judge.tf32" in d]
    tf32.stolen = "an attribute a candidate added"
    try:
        assert "fitness.judge.tf32: attribute(s) added: stolen" in state.verify()
    finally:
        del tf32.stolen


@pytest.mark.parametrize("name", ["global_forward_hook", "registration_hook"])
def test_a_global_module_hook_is_caught_before_the_reference_is_built(name, sandbox):
    """A hook in torch's global nn.Module registries runs inside the reference: one returning the candidate's last
    output made the reference agree with anything, one zeroing registered parameters zeroed the reference's weights
    (issue 63). The static check refuses both (tests/fitness/test_evaluator_cheats.py); without it they are found at
    import."""
    problem = str(PROBLEMS / "gemm_sum.py") if name == "registration_hook" else SCALE_SHIFT
    with make_evaluator(problem, static_check=False, trials=1, coverage=False, timeout_s=60, sandbox=sandbox) as ev:
        rejected_for(ev.evaluate(candidate(name)), "(import): torch's global nn.Module hooks changed")


def test_the_references_parameters_are_watched():
    linear = torch.nn.Linear(4, 3)
    linear.register_buffer("steps", torch.zeros(1))
    state = JudgeState.capture()
    state.watch(linear)
    linear.steps += 1  # a reference's own forward may update its buffers
    assert state.verify() == []
    with torch.no_grad():
        linear.weight[1, 2] += 1.0
    linear.bias = torch.nn.Parameter(linear.bias.detach().clone())
    assert sorted(state.verify()) == ["the reference's bias replaced or deleted", "the reference's weight changed"]
