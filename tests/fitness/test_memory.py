"""KernelBench-sized problems fit the device: the baselines' timing rotates only as many input sets as its memory
holds, never fewer than one, and says what was reduced; a candidate's timing holds one fresh draw at a time."""
import torch

from conftest import SCALE_SHIFT, candidate, make_evaluator
from fitness.judge.inputs import timing_inputs
from fitness.measure.memory import input_sets_that_fit, spec_bytes, tensor_bytes
from fitness.problems.problem import load_problem, resolve_problem
from fitness.measure.result import WorkerJob
from fitness.settings import EvalSettings

GiB = 1 << 30


def test_input_sets_are_cut_to_what_fits_and_never_below_one():
    assert input_sets_that_fit(3, per_set=10 * GiB, reserve=4 * GiB, budget=64 * GiB) == (3, "")
    count, note = input_sets_that_fit(3, per_set=22 * GiB, reserve=15 * GiB, budget=63 * GiB)  # 7.5 GB tensors
    assert count == 2 and "2 input set(s) instead of 3" in note and "22.0 GiB" in note
    assert input_sets_that_fit(3, per_set=80 * GiB, reserve=0, budget=60 * GiB)[0] == 1
    assert input_sets_that_fit(3, per_set=80 * GiB, reserve=0, budget=None) == (3, "")  # CPU: no limit


def test_sizes_are_counted_from_tensors_and_output_specs():
    assert tensor_bytes([torch.zeros(4, 8), (torch.zeros(2, dtype=torch.float16), 3)]) == 4 * 8 * 4 + 2 * 2
    assert spec_bytes([((4, 8), torch.float32), ((16,), torch.bfloat16)]) == 128 + 32


def test_a_timing_that_does_not_fit_uses_fewer_input_sets_and_says_so():
    problem = load_problem(resolve_problem(SCALE_SHIFT))
    job = WorkerJob("candidate", "cpu", settings=EvalSettings(timing={"memory_budget_bytes": 1}))
    sets, note = timing_inputs(problem, job, 0, copies=1, output_bytes=1600, kept_outputs=False)
    assert len(sets) == 1 and "timing rotated 1 input set(s) instead of 3" in note, note
    job = WorkerJob("candidate", "cpu")  # the default budget: the CPU has no device limit
    sets, note = timing_inputs(problem, job, 0, copies=1, output_bytes=1600, kept_outputs=False)
    assert len(sets) == 3 and note == ""


def test_a_candidates_timing_holds_one_fresh_set_at_a_time_whatever_the_budget(sandbox):
    with make_evaluator(SCALE_SHIFT, timing={"memory_budget_bytes": 1}, sandbox=sandbox) as ev:
        result = ev.evaluate(candidate("good"))
    assert result.status == "ok", result.reason
    assert not any("input set" in n for n in result.notes), result.notes
    assert result.guards["timed_outputs_checked"] == [0, 1, 2]  # every measured call, each on its own draw
