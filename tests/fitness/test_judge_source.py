"""The notebook's one call (``fitness.evaluation.notebook.judge_source``): a source judged against a problem file by
name of policy, as ``kernelevo evaluate`` judges it; a correct kernel passes and is timed, a wrong one fails, a policy
that does not exist is a user's error naming the ones that do."""
import pytest

from conftest import DEVICE, SCALE_SHIFT, candidate
from kernelevo.core.errors import KernelevoError
from fitness.evaluation.notebook import judge_source
from fitness.settings import EvalSettings

SETTINGS = EvalSettings(trials=2, timing={"interpreter_reps": 1}, prestart_worker=False, warm_judge=False)


def test_a_correct_source_passes_and_is_timed_a_wrong_one_fails():
    good = judge_source(SCALE_SHIFT, candidate("good"), policy="triton", device=DEVICE, settings=SETTINGS)
    assert good.ok and good.status == "ok" and good.time_s is not None and good.time_s > 0
    assert good.policy["name"] == "triton" and good.trials_passed == 2
    wrong = judge_source(SCALE_SHIFT, candidate("wrong_math"), device=DEVICE, settings=SETTINGS, timed=False)
    assert wrong.status == "incorrect" and "exceed atol" in wrong.reason and wrong.time_s is None


def test_an_unknown_policy_is_a_users_error():
    with pytest.raises(KernelevoError, match="unknown precision policy 'tf33'.*triton"):
        judge_source(SCALE_SHIFT, candidate("good"), policy="tf33", device=DEVICE)
