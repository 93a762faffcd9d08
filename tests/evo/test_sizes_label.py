"""On a GPU the fastest kernels are judged for correctness only at other sizes, each a verdict per size (runs-correct,
refuses-cleanly, defective), and the run's best is the fastest that is not defective there (evo/runs/other_sizes.py;
its record said by evo/reports/sizes_record.py).
No GPU here: the interpreter's evaluator stands in for the run's (the check needs correctness only, which the
interpreter gives), on scale_shift at 4 x 60 (other sizes: 4 x 45, and odd, 4 x 43) with sizes_verdicts' three variants
as the run's kernels: 0 reads its sizes from its input, 1 refuses other shapes with a ValueError (a guard), 2 has a mask
that is wrong where its block does not divide the size."""
import re

import pytest

from conftest import DEVICE, SCALE_SHIFT, make_evaluator
from fakes import GENERIC, GUARDED, WRONG_MASK, add_kernel, judge_plan, sizes_kernel, sizes_run_store
from evo.records.checkpoint import Checkpoint
from evo.records.store import RunStore
from evo.reports import sizes_record
from evo.reports.console import table
from evo.reports.outcome import summarise
from evo.runs.other_sizes import SizesLabel, kernel_verdict, settled

NO_SIZES = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def judged(sandbox, monkeypatch):
    """The check at other sizes, planned from the stand-in evaluator, and the worker jobs it sent (kind, timed,
    what each answered)."""
    evaluator = make_evaluator(SCALE_SHIFT, sizes={"dim": 60}, sandbox=sandbox, trials=1)
    check = SizesLabel.plan(judge_plan(SCALE_SHIFT, DEVICE), evaluator)
    jobs, run = [], sandbox.run

    def spy(job, *args, **kwargs):
        outcome = run(job, *args, **kwargs)
        jobs.append((job.kind, job.timed, outcome.result or {}))
        return outcome

    monkeypatch.setattr(sandbox, "run", spy)
    yield check, jobs
    evaluator.close()


def verdicts(outcome) -> dict:
    return {i: (v["verdict"], [s["verdict"] for s in v["sizes"]]) for i, v in outcome.other_sizes_verdicts.items()}


@pytest.mark.parametrize("fastest", [GENERIC, GUARDED])
def test_a_best_that_runs_or_refuses_cleanly_at_other_sizes_stays_the_best(tmp_path, sandbox, judged, fastest):
    check, jobs = judged
    assert (check.problem_sizes, check.other_sizes, check.why_not) == ({"dim": 60}, {"dim": 45}, "")
    assert [changed for changed, _ in check.sets] == [{"dim": 45}, {"dim": 43}]  # smaller, and odd
    store, checkpoint = sizes_run_store(tmp_path, [fastest, WRONG_MASK])
    record = check.judge(store, checkpoint, sandbox)
    # two jobs: the best kernel's correctness at each other size, untimed (no timing, no baseline job); the slower
    # kernel is not judged
    assert [(kind, timed) for kind, timed, _ in jobs] == [("candidate", False)] * 2
    assert all("timing" not in result for _, _, result in jobs)
    runs, note = sizes_record.label(record)
    outcome = summarise(store, checkpoint)
    # the best kernel, its time and speed-ups and the status are the search's
    assert (outcome.status, outcome.best_id, outcome.best_s, outcome.speedup_vs_eager) == ("ok", "2.0", 1e-5, 2.0)
    assert (outcome.runs_at_other_sizes, outcome.other_sizes_note) == (runs, note)
    if fastest == GENERIC:
        assert verdicts(outcome) == {"2.0": ("runs-correct", ["runs-correct"] * 2)}
        assert record["runs"] is True and note == "yes, correct at dim=45; dim=43 too"
        assert sizes_record.label_flagged("src", runs, note) == "src"
    else:  # the guard's ValueError: a clean refusal, not a defect
        assert verdicts(outcome) == {"2.0": ("refuses-cleanly", ["refuses-cleanly"] * 2)}
        assert record["runs"] is False and record["status"] == "runtime_error"
        assert note.startswith("no, specialised to the problem's sizes (dim=60); refuses dim=45; dim=43 cleanly "
                               "(ValueError: ModelNew.forward: x expected shape (4, 60), given shape (4, 45)")
        assert (sizes_record.label_flagged("src", runs, note)
                == f"# kernelevo: RUNS ONLY AT THE PROBLEM'S SIZES: {note}\nsrc")
    assert re.search(rf"\n  runs at other sizes +{re.escape(note)}\n", table(outcome))
    store.close()


def test_a_kernel_with_a_wrong_mask_is_defective_and_never_the_best(tmp_path, sandbox, judged):
    check, jobs = judged
    store, checkpoint = sizes_run_store(tmp_path, [WRONG_MASK, GUARDED, GENERIC])  # the fastest is defective
    record = check.judge(store, checkpoint, sandbox)
    assert len(jobs) == 4  # two kernels at two sizes: the second is not defective, the third is not judged
    outcome = summarise(store, checkpoint)
    assert verdicts(outcome) == {"3.0": ("defective", ["defective"] * 2),
                                 "2.0": ("refuses-cleanly", ["refuses-cleanly"] * 2)}
    assert outcome.other_sizes_verdicts["3.0"]["sizes"][0]["status"] == "incorrect"  # its tail left unwritten
    # the best is the fastest kernel that is not defective: slower, with its own time and speed-up
    assert (record["chosen"], outcome.status, outcome.best_id, outcome.best_s) == ("2.0", "ok", "2.0", 2e-5)
    assert outcome.speedup_vs_eager == 1.0 and outcome.runs_at_other_sizes is False
    assert "2.0 is the best: faster kernels defective there: 3.0 defective (incorrect: " in outcome.other_sizes_note
    store.close()


def test_when_every_kernel_tried_is_defective_the_run_says_so(tmp_path, sandbox, judged):
    check, jobs = judged
    store, checkpoint = sizes_run_store(tmp_path, [WRONG_MASK])
    record = check.judge(store, checkpoint, sandbox)
    outcome = summarise(store, checkpoint)
    assert record["chosen"] is None and sizes_record.label_defective(record)
    assert (outcome.status, outcome.best_id, outcome.ok) == ("defective-at-other-sizes", "1.0", True)
    assert outcome.other_sizes_note.startswith("no, defective at dim=45; dim=43: every kernel tried failed there")
    flagged = sizes_record.label_flagged("src", outcome.runs_at_other_sizes, outcome.other_sizes_note, True)
    assert flagged.startswith("# kernelevo: DEFECTIVE AT OTHER SIZES: no, defective")
    store.close()


def test_without_other_sizes_nothing_is_judged_and_the_label_says_why(tmp_path, sandbox, monkeypatch):
    problem = tmp_path / "no_sizes.py"
    problem.write_text(NO_SIZES)
    evaluator = make_evaluator(str(problem), sandbox=sandbox, trials=1)
    check = SizesLabel.plan(judge_plan(str(problem), DEVICE), evaluator)
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: pytest.fail("nothing is judged without other sizes"))
    store = RunStore(tmp_path / "run")
    add_kernel(store, sizes_kernel(GENERIC, 1e-5, "1.0"))
    record = check.judge(store, Checkpoint(generation=1, hall_of_fame=["1.0"]), sandbox)
    assert sizes_record.label(record) == (None, "not checked (the problem has no size constants to change)")
    assert sizes_record.label_verdict(store, "1.0") == record and sizes_record.label_verdict(store, "0.0") is None
    store.close()
    evaluator.close()


def test_a_kernel_correct_at_one_other_size_refusing_the_other_refuses_cleanly_and_says_where():
    assert kernel_verdict(["runs-correct", "refuses-cleanly"]) == "refuses-cleanly"
    assert kernel_verdict(["refuses-cleanly", None, "defective"]) == "defective"  # the worst, a defect first
    assert kernel_verdict(["runs-correct", None]) is None  # no verdict where the judge had none
    sizes = [{"at": "dim=45", "verdict": "runs-correct", "status": "ok", "reason": ""},
             {"at": "dim=43", "verdict": "refuses-cleanly", "status": "runtime_error", "reason": "ValueError: odd"}]
    tried = [{"id": "1.0", "verdict": "refuses-cleanly", "status": "runtime_error", "reason": "ValueError: odd",
              "sizes": sizes}]
    record = {"best": "1.0", "problem_sizes": {"dim": 60}, "other_sizes": {"dim": 45},
              "size_sets": [{"dim": 45}, {"dim": 43}], "tried": tried, "why_not": "", **settled(tried)}
    assert sizes_record.label(record) == (False, "no, specialised to the problem's sizes (dim=60); refuses dim=43 "
                                                "cleanly (ValueError: odd), correct at dim=45")
