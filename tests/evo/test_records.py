"""One record per concept: a run's outcome (``RunOutcome``: summary.json, read back by the report, the bench and
multirun), a search's checkpoint (``Checkpoint``) and generation 0's seeds (``Seed``); the stop rule the search and
a resume share (``evo.evolution.stopping``). In-process, on records made by hand."""
import json
import re
from dataclasses import dataclass, fields, replace
from dataclasses import field as dataclass_field

import pytest

from evo.evolution import stopping
from evo.benchmark.bench import Row, save_row, saved_row, BenchTask
from evo.benchmark.bench_report import write_bench_report
from evo.records.checkpoint import Checkpoint
from evo.benchmark.multirun import write_multirun_report
from evo.reports.outcome import SUMMARY_FILE, RunOutcome
from evo.settings import Budget
from evo.runs.seeding import Seed
from evo.records.store import RunStore
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from kernelevo.core.records import from_record
from fitness.measure.baselines import BASELINES
from fitness.problems.problem_spec import ProblemSpec
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure.timing import TimingStats
from kernelevo.resuming import stops_at_once

OUTCOME = RunOutcome(status="ok", problem="toy", timer="cuda-events", seed="inductor", best_id="2.0", best_s=2e-6,
                     seed_s=4e-6, seed_written_s=5e-6, eager_s=6e-6, speedup_vs_eager=3.0, speedup_vs_best=3.0,
                     best_baseline="eager", baseline_status={"eager": "ok"}, labels=["uses-torch-compute"],
                     evaluations=12, distinct_evaluations=10, search_wall_s=3.5, evaluations_per_hour=12343.0,
                     anytime={"columns": ["speedup_vs_eager"], "points": [
                         {"evaluations": 1, "gpu_s": 1.0, "llm_cost_usd": 0.0, "llm_calls": 0, "speedup_vs_eager": 3.0}]})


def test_the_outcome_has_a_field_per_baseline_and_survives_json(tmp_path):
    names = {f.name for f in fields(RunOutcome)}
    assert all(f"{b}_s" in names and f"speedup_vs_{b}" in names for b in BASELINES)
    assert RunOutcome.from_json(OUTCOME.to_json()) == OUTCOME
    OUTCOME.write(tmp_path)
    assert RunOutcome.read(tmp_path) == OUTCOME and OUTCOME.seed_speedup == pytest.approx(2.5)


def test_an_older_summary_reads_with_defaults_and_a_newer_ones_unknown_fields_are_left_out_with_a_note(tmp_path,
                                                                                                      capsys):
    """Issue 46 changed this: a newer summary was refused by name; by the one record rule (``kernelevo.core.records``)
    its
    unknown fields are left out, with a note naming them and the file."""
    old = {"status": "ok", "problem": "toy", "best_s": 1e-3, "speedup_vs_eager": 2.0}  # before most fields existed
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(old))
    read = RunOutcome.read(tmp_path)
    assert (read.best_s, read.speedup_vs_eager, read.evaluations, read.labels) == (1e-3, 2.0, None, [])
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({**old, "speedup_vs_tomorrow": 9.0}))
    capsys.readouterr()
    assert RunOutcome.read(tmp_path) == read
    assert re.fullmatch(r"\[kernelevo\] note: \S*summary.json has fields this kernelevo version does not know "
                        r"\(speedup_vs_tomorrow\), left out: written by another version\n", capsys.readouterr().out)


@dataclass
class Record:
    name: str
    count: int = 0
    tags: list = dataclass_field(default_factory=list)


def test_the_record_rule_takes_known_fields_defaults_missing_ones_and_drops_unknown_ones_with_a_note(capsys):
    assert from_record(Record, {"name": "a", "count": 2, "tags": ["x"]}, "r.json") == Record("a", 2, ["x"])
    assert capsys.readouterr().out == ""  # nothing to say about a record of this version
    assert from_record(Record, {"name": "b"}, "r.json") == Record("b")  # an older record: defaults
    assert from_record(Record, {"name": "c", "colour": "red", "age": 3}, "r.json") == Record("c")
    assert capsys.readouterr().out == ("[kernelevo] note: r.json has fields this kernelevo version does not know "
                                       "(age, colour), left out: written by another version\n")
    with pytest.raises(ValueError, match=r"r.json has keys \['colour'\] .*known: \['count', 'name', 'tags'\].*"
                                         r"add them to Record"):
        from_record(Record, {"name": "c", "colour": "red"}, "r.json", own=True)  # written by this very code
    with pytest.raises(TypeError, match="name"):
        from_record(Record, {"count": 1})  # a field without a default cannot be made up


@pytest.mark.parametrize("read, data", [
    (RunOutcome.from_dict, {"status": "ok"}),
    (Checkpoint.from_dict, {"generation": 1}),
    (EvalResult.from_dict, {"status": "ok"}),
    (TimingStats.from_dict, {"timer": "interpreter", "n": 1, "median_s": 1.0, "mean_s": 1.0, "min_s": 1.0,
                             "max_s": 1.0, "p25_s": 1.0, "p75_s": 1.0, "stream_median_s": 1.0,
                             "all_streams_median_s": 1.0}),
    (ProblemSpec.from_dict, {"name": "toy", "path": "toy.py"}),
    (Genome.from_dict, {"source": "X = 1\n"}),
    (lambda d: Row.from_dict(d), {"name": "toy", "status": "ok"}),
    (lambda d: Individual.from_lineage_dict(d, None).lineage_dict(), {"id": "1.0", "genome": {"source": "X = 1\n"}}),
])
def test_every_reader_follows_the_record_rule(read, data, capsys):
    assert read({**data, "from_tomorrow": 1}) == read(data)
    assert "(from_tomorrow), left out" in capsys.readouterr().out


def test_report_bench_and_multirun_read_the_same_record(tmp_path):
    task = BenchTask("toy", "toy")
    save_row(tmp_path, task, Row("toy", "ok", summary=OUTCOME))
    assert saved_row(tmp_path, task).summary == OUTCOME  # the bench's saved row: the record itself
    summary = write_bench_report(tmp_path, [saved_row(tmp_path, task)], "one", {})
    assert summary["geomean_vs_eager"] == pytest.approx(3.0) and summary["labelled"] == {"uses-torch-compute": 1}
    assert Row.from_dict(json.loads((tmp_path / "bench.json").read_text())["rows"][0]).summary == OUTCOME
    sweep = tmp_path / "sweep"
    for i, outcome in enumerate((OUTCOME, replace(OUTCOME, speedup_vs_eager=1.5, labels=[]))):
        RunStore(sweep / str(i)).close()
        outcome.write(sweep / str(i))
    write_multirun_report(sweep)
    rows = [Row.from_dict(r) for r in json.loads((sweep / "multirun.json").read_text())["rows"]]
    assert [r.summary.speedup_vs_eager for r in rows] == [3.0, 1.5] and rows[0].summary == OUTCOME
    assert rows[1].status == "ok" and rows[1].wall_s == pytest.approx(3.5)


def test_a_checkpoint_round_trips_and_an_older_one_reads_with_defaults():
    full = Checkpoint(3, best_s=1e-3, stale=1, children=10, elapsed_s=4.0, islands=[["1.0"]], seen=["k"],
                      tuned_at={"k": 2}, logbook=[{"gen": 0}], hall_of_fame=["1.0"], snapshots={"9": [["0.0"]]})
    assert Checkpoint.from_json(full.to_json()) == full
    old = Checkpoint.from_dict({"generation": 2, "hall_of_fame": ["0.0"], "offspring": 3})  # keys none reads now
    assert old.folded(per_generation=4) == 8 and old.stale == 0 and full.folded(4) == 10


def test_a_seed_is_its_genome_and_what_made_it():
    seed = Seed.from_source("BLOCK = 64\n", "inductor:nd_tiling")
    genome, made_by = seed  # where generation 0 is unpacked
    assert genome.source == "BLOCK = 64\n" and made_by == seed.made_by == "inductor:nd_tiling"


class Spent:
    def __init__(self, evaluations=0, seconds=0.0):
        self.evaluations, self.seconds = evaluations, seconds

    def evaluation_count(self):
        return self.evaluations

    def evaluation_seconds(self):
        return self.seconds


def test_the_search_and_a_resume_stop_on_the_same_rule_gpu_seconds_included():
    budget = Budget(generations=10, patience=None, max_gpu_s=5.0, max_evaluations=100)
    assert [s.key for s in stopping.spent(budget, Spent(20, 6.0), 1.0)] == ["max_gpu_s"]  # the search's own
    said = stops_at_once(budget, 4, Checkpoint(2, children=8), Spent(20, 6.0))
    assert said == ["its 6 evaluation-seconds spend search.max_gpu_s=5 (extend it: search.max_gpu_s above 6)"]
    assert stops_at_once(budget, 4, Checkpoint(2, children=8), Spent(20, 4.0)) == []
    assert [s.reason for s in stopping.ended(budget, 11, 10, 0)] == ["10 generations done"]
    assert stops_at_once(budget, 4, Checkpoint(10), Spent()) == [
        "its 10 generations are done (search.generations above 10 extends it)"]
