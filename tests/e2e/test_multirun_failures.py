"""Issue 66, point 5: a sweep survives a failed job. A job of `kernelevo run --multirun` that fails (here its reference
fails where the judge runs it, as KernelBench's level1/95 did at the CPU's shrunk sizes) is its row in the multirun
table, with its error; the sweep runs every other job and writes its tables, and the command exits with the job's
status. The tables count what ran: runs, configurations and problems apart."""
import json

import pytest

from conftest import TINY, kernelevo
from kernelevo.core.individual import LAUNCHES
from evo.benchmark.multirun import write_multirun_report
from evo.benchmark.strategies_report import write_strategies_report
from evo.records.store import RunStore
from evo.reports.outcome import RunOutcome
from evo.runs.failure import FailureKind, RunFailure

BROKEN = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.device.type != "meta":  # the cost model's meta run passes; the judge's run fails
            raise RuntimeError("the reference cannot run at these sizes")
        return x * 2


dim = 64


def get_inputs():
    return [torch.rand(dim)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_failing_job_is_its_row_and_the_sweep_runs_the_others(tmp_path):
    broken = tmp_path / "broken_ref.py"
    broken.write_text(BROKEN)
    proc = kernelevo("run", "--multirun", f"problem=rmsnorm,{broken},row_softmax", "search.generations=0", *TINY,
                     cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr  # the failed job's own status
    assert "1 job(s) of the sweep failed, each a row of its table" in proc.stderr
    (sweep,) = tmp_path.glob("outputs/multirun/*/*")
    assert len(list(sweep.glob("*/best_kernel.py"))) == 2  # the jobs before and after the failed one ran
    rows = json.loads((sweep / "multirun.json").read_text())["rows"]
    assert [row["status"] for row in rows] == ["ok", "failed", "ok"]
    assert "the reference cannot run at these sizes" in rows[1]["reason"] and rows[1]["problem"] == "broken_ref"
    assert "[multirun] kernelevo multirun: 3 runs" in proc.stdout and "correct: 2 of 3" in proc.stdout


def job(folder, overrides: list[str], summary: RunOutcome | None = None) -> None:
    """A sweep's job as Hydra and the run leave it: its overrides, its run store, its outcome."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    RunStore(folder).close()
    if summary is not None:
        summary.write(folder)


def test_the_tables_count_runs_configurations_and_problems_apart(tmp_path):
    """2 problems x 2 strategies x 2 seeds: 8 runs of 4 configurations of 2 problems, one run failed."""
    jobs = [(p, s, seed) for p in ("rmsnorm", "row_softmax") for s in ("sampling", "tree") for seed in (0, 1)]
    for n, (problem, strategy, seed) in enumerate(jobs):
        folder = tmp_path / f"{n}-{problem}"
        overrides = [f"problem={problem}", f"search/strategy={strategy}", f"search.seed={seed}"]
        if n == 5:
            (folder / ".hydra").mkdir(parents=True)
            (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
            RunFailure("its reference failed", 2, FailureKind.USER, problem=problem).keep(folder)
        else:
            job(folder, overrides, RunOutcome(status="ok", timer="interpreter", problem=problem,
                                              ranked_by=LAUNCHES, evaluations=4))
    write_multirun_report(tmp_path)
    text = (tmp_path / "multirun.md").read_text()
    assert "- correct: 7 of 8 runs (4 configurations of 2 problems x up to 2 search seeds) (88%)" in text, text
    saved = json.loads((tmp_path / "multirun.json").read_text())
    (level,) = saved["summary"]["paper"]["levels"]  # 2 problems attempted, 2 seeds per configuration
    assert (level["level"], level["attempted"], level["runs"], level["seeds"], level["correct"]) == \
        ("other", 2, 8, 2, 7)
    assert "## Per level" not in text  # no KernelBench level: no per-level table (it read "other | ?")
    rows = saved["rows"]
    assert rows[5]["status"] == "failed" and rows[5]["reason"] == "its reference failed"
    write_strategies_report(tmp_path)
    table = json.loads((tmp_path / "strategies.json").read_text())
    assert table["failed"] == {"5-row_softmax": "its reference failed"} and table["unfinished"] == []
    assert sum(row["seeds"] for row in table["rows"]) == 7 and len(table["runs"]) == 7
    assert "Failed (the job's error; the sweep ran the others): 5-row_softmax: its reference failed" in \
        (tmp_path / "strategies.md").read_text()
