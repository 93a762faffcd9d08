"""On a GPU the run's best kernel is judged for correctness only at other sizes and labelled when it runs only at the
problem's own (evo/reports/sizes_label.py). No GPU here: the interpreter's evaluator stands in for the run's (the
check needs correctness only, which the interpreter gives), on scale_shift at 4 x 60 with baked_or_generic's two
variants as the run's kernels: BAKED=1 has 4 x 60 as literals, BAKED=0 reads its sizes from its input."""
import re

import pytest

from conftest import CANDIDATES, DEVICE, SCALE_SHIFT, make_evaluator
from core.genome import Genome
from core.individual import Individual
from evo.records.checkpoint import Checkpoint
from evo.records.store import RunStore
from evo.reports import sizes_label
from evo.reports.console import table
from evo.reports.outcome import summarise
from evo.reports.sizes_label import SizesLabel
from fitness.comparison.policy import load_policy
from fitness.evaluation.plan import JudgePlan
from fitness.measure.result import EvalResult
from fitness.settings import EvalSettings, ProblemSettings

# one launch for the size-generic variant (the file's 30 make it the slower on the interpreter, of no use here)
SOURCE = (CANDIDATES / "baked_or_generic.py").read_text().replace("REPEAT = 30", "REPEAT = 1")
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


def judge_plan(problem: str) -> JudgePlan:
    """The run's judge, one trial a kernel, on the test device."""
    return JudgePlan(ProblemSettings(name=problem), EvalSettings(trials=1), load_policy("triton"), device=DEVICE)


def kernel(baked: int, time_s: float, ind_id: str) -> Individual:
    """One of the run's correct kernels, with its (GPU) time as the search measured it."""
    genome = Genome.from_source(SOURCE).with_params({"BAKED": baked})
    result = EvalResult(status="ok", problem="scale_shift", device="cuda:0", timer="cuda-events", time_s=time_s,
                        speedup_vs_eager=2.0, policy={"name": "triton"})
    return Individual(ind_id, genome, (), "seed", 0, result)


def add(store: RunStore, individual: Individual) -> None:
    store.add_individual(individual)
    store.add_evaluation(individual.key, individual.result)


def run_store(tmp_path, fastest: int) -> tuple[RunStore, Checkpoint]:
    """A finished run's store whose best (the hall of fame's first) is the variant BAKED=`fastest`."""
    store = RunStore(tmp_path / f"run{fastest}")
    add(store, kernel(fastest, 1e-5, "1.0"))
    add(store, kernel(1 - fastest, 2e-5, "0.0"))
    checkpoint = Checkpoint(generation=1, best_s=1e-5, hall_of_fame=["1.0", "0.0"])
    store.save_checkpoint(checkpoint)
    return store, checkpoint


@pytest.fixture
def judged(sandbox, monkeypatch):
    """The check at other sizes, planned from the stand-in evaluator, and the worker jobs it sent (kind, timed,
    what each answered)."""
    evaluator = make_evaluator(SCALE_SHIFT, sizes={"dim": 60}, sandbox=sandbox, trials=1)
    check = SizesLabel.plan(judge_plan(SCALE_SHIFT), evaluator)
    jobs, run = [], sandbox.run

    def spy(job, *args, **kwargs):
        outcome = run(job, *args, **kwargs)
        jobs.append((job.kind, job.timed, outcome.result or {}))
        return outcome

    monkeypatch.setattr(sandbox, "run", spy)
    yield check, jobs
    evaluator.close()


@pytest.mark.parametrize("fastest", [0, 1])
def test_the_best_kernel_is_labelled_by_whether_it_runs_at_other_sizes(tmp_path, sandbox, judged, fastest):
    check, jobs = judged
    assert (check.problem_sizes, check.other_sizes, check.why_not) == ({"dim": 60}, {"dim": 45}, "")
    store, checkpoint = run_store(tmp_path, fastest)
    record = check.judge(store, checkpoint, sandbox)
    # one job: the best kernel's correctness at the other sizes, untimed (no timing, no baseline job)
    assert [(kind, timed) for kind, timed, _ in jobs] == [("candidate", False)]
    assert "timing" not in jobs[0][2]
    runs, note = sizes_label.label(record)
    outcome = summarise(store, checkpoint)
    # a label: the best kernel, its time and speed-ups and the status are the search's
    assert (outcome.status, outcome.best_id, outcome.best_s, outcome.speedup_vs_eager) == ("ok", "1.0", 1e-5, 2.0)
    assert (outcome.runs_at_other_sizes, outcome.other_sizes_note) == (runs, note)
    if fastest == 0:  # reads its sizes from its input
        assert record["runs"] is True and note == "yes, correct at dim=45 too"
        assert sizes_label.flagged("src", runs, note) == "src"
    else:  # 4 x 60 baked in as literals
        assert record["runs"] is False and record["status"] == "incorrect"
        assert note.startswith("no, specialised to the problem's sizes (dim=60); failed at dim=45: incorrect (")
        assert "output has shape (4, 60), expected (4, 45)" in note
        assert sizes_label.flagged("src", runs, note) == f"# kernelevo: RUNS ONLY AT THE PROBLEM'S SIZES: {note}\nsrc"
    assert re.search(rf"\n  runs at other sizes +{re.escape(note)}\n", table(outcome))
    store.close()


def test_without_other_sizes_nothing_is_judged_and_the_label_says_why(tmp_path, sandbox, monkeypatch):
    problem = tmp_path / "no_sizes.py"
    problem.write_text(NO_SIZES)
    evaluator = make_evaluator(str(problem), sandbox=sandbox, trials=1)
    check = SizesLabel.plan(judge_plan(str(problem)), evaluator)
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: pytest.fail("nothing is judged without other sizes"))
    store = RunStore(tmp_path / "run")
    add(store, kernel(0, 1e-5, "1.0"))
    record = check.judge(store, Checkpoint(generation=1, hall_of_fame=["1.0"]), sandbox)
    assert sizes_label.label(record) == (None, "not checked (the problem has no size constants to change)")
    assert sizes_label.verdict(store, "1.0") == record and sizes_label.verdict(store, "0.0") is None
    store.close()
    evaluator.close()
