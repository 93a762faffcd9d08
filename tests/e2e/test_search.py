"""The search on the CPU interpreter: end-to-end runs, kill and resume, Optuna studies that continue, bad overrides."""
import difflib
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from markupsafe import escape  # the page escapes as jinja2 autoescape does

from conftest import (CANDIDATES, PROBLEMS, REPO, TINY, assert_lineage_is_sound, candidate, interruptible, kernelevo,
                      lineage_of, log_counts, make_evaluator, read_store, replay_measurements, run_dir_of)
from evo.service.evaluation import EvaluationService
from evo.reports.report import collect
from evo.evolution.selection import DistinctParents, EpsilonGreedy, Tournament, UniformRandom
from evo.records.store import RunStore
from evo.tuning.tuner import Tuner
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from kernelevo.core.evaluation_record import EvalResult
from fitness.workers.pool import SANDBOXES
from fitness.workers.zygote import Zygote

ZYGOTE_INIT = Zygote.__init__


def individual(genome: Genome, status: str, time_s: float | None, name: str = "1.0") -> Individual:
    return Individual(name, genome, result=EvalResult(status=status, time_s=time_s))


@pytest.mark.slow
def test_run_produces_a_verified_best_kernel_and_a_report(tmp_path, sandbox):
    proc = kernelevo("run", "problem=rmsnorm", *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no GPU: running kernels on the CPU through Triton's interpreter" in proc.stdout
    assert "[kernelevo] gen   0" in proc.stdout and "[kernelevo] gen   1" in proc.stdout
    run_dir = run_dir_of(proc.stdout)
    best = run_dir / "best_kernel.py"
    assert best.is_file() and any(l.strip().startswith("best kernel file") and l.strip().endswith(str(best))
                                  for l in proc.stdout.splitlines())
    calls, distinct = log_counts(run_dir)
    assert calls == distinct > 1  # the same code is never evaluated twice
    assert_lineage_is_sound(read_store(run_dir, lambda store: store.individuals()))
    # the best kernel passes a fresh evaluation (the worker's one fork server: conftest's sandbox)
    with make_evaluator(problem="rmsnorm", size_preset="test", sandbox=sandbox) as ev:
        assert ev.evaluate(best.read_text()).status == "ok"
    page = run_dir / "report.html"  # written at the end of the run, said in its last line
    assert proc.stdout.rstrip().splitlines()[-1] == f"  report: {page}"
    report = read_store(run_dir, collect)  # what the page shows, as data
    assert_report(report, best.read_text())
    assert_page_shows(page.read_text(), report)
    page.unlink()
    (run_dir / "report.md").unlink()
    again = kernelevo("report", f"run_dir={run_dir}", cwd=tmp_path)  # writes it again from the store
    assert again.returncode == 0, again.stderr
    assert_page_shows(page.read_text(), report)
    text = (run_dir / "report.md").read_text()
    assert "## Lineage of the best kernel" in text and "0.0 seed, generation 0" in text
    assert (run_dir / "fitness.png").stat().st_size > 1000


def leaves(node) -> list:
    """The kernels of a lineage tree made from nothing (not drawn above already)."""
    return [node] if not node.parents else [leaf for parent in node.parents for leaf in leaves(parent)]


def assert_report(report, best: str) -> None:
    """The report of an interpreter run: interpreter times and no speed-up, the lineage down to the seed, the diff
    of the best kernel against the seed as written."""
    assert report.interpreter and report.plot_png
    figures = dict(report.summary)
    assert "best kernel, interpreter wall-clock" in figures
    assert not any("speed-up vs" in figure for figure in figures)  # the interpreter's times are no kernel speed
    assert leaves(report.lineage) and all(leaf.label.startswith("0.0 seed, generation 0")
                                          for leaf in leaves(report.lineage))  # every branch ends there
    seed = (REPO / "fitness" / "suite" / "rmsnorm" / "seed.py").read_text()
    added = [line for line in difflib.unified_diff(seed.splitlines(), best.splitlines(), lineterm="")
             if line.startswith("+") and not line.startswith("+++")]
    assert [line for line in report.diff if line.startswith("+") and not line.startswith("+++")] == added


def assert_page_shows(page: str, report) -> None:
    """report.html draws that data: the summary's figures, the plot, each lineage leaf, the diff (escaped)."""
    assert all(escape(figure) in page for figure, _ in report.summary)
    assert "data:image/png;base64," in page and "<h2>Lineage of the best kernel</h2>" in page
    assert all(escape(leaf.label) in page for leaf in leaves(report.lineage))
    if report.diff:
        assert "<span class='hunk'>--- seed (as written)</span>" in page
        assert all(f"<span class='add'>{escape(line)}</span>" in page for line in report.diff
                   if line.startswith("+") and not line.startswith("+++"))
    else:  # tuning kept the seed's own defaults
        assert "The best kernel is the seed as written." in page


@pytest.mark.slow
def test_a_run_killed_mid_generation_resumes_losing_and_repeating_nothing(tmp_path):
    args = ["problem=elementwise_chain", "search.mu=2", "search.lambda_=3", "search.generations=3",
            "search.patience=null", "search.tuner.trials=2", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]
    proc = kernelevo("run", *args, cwd=tmp_path, wait=False)
    run_dir, deadline = None, time.time() + 300
    while time.time() < deadline:
        line = proc.stdout.readline()
        if "run dir " in line:
            run_dir = run_dir_of(line)
        if "gen   0" in line:  # generation 0 checkpointed; kill during generation 1
            break
    assert run_dir is not None
    before = log_counts(run_dir)[0]
    while log_counts(run_dir)[0] < before + 2 and time.time() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = set(read_store(run_dir, lambda store: store.evaluations()))
    assert len(done_before) >= before + 2

    resumed = kernelevo("resume", f"run_dir={run_dir}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "[kernelevo] gen   3" in resumed.stdout and "gen   0" not in resumed.stdout
    calls, distinct = log_counts(run_dir)
    assert calls == distinct  # no evaluation was repeated ...
    done_after = set(read_store(run_dir, lambda store: store.evaluations()))
    assert done_before <= done_after  # ... and none was lost
    assert read_store(run_dir, lambda store: store.latest_checkpoint().generation) == 3
    assert_lineage_is_sound(read_store(run_dir, lambda store: store.individuals()))


def tune(tuner, individual):
    """Tune, then wait until the study is in run.db (a run closes its tuner at the end)."""
    tuned = tuner.tune(individual)
    tuner.close()
    return tuned, tuner


def test_tuning_again_repeats_no_evaluation_and_chooses_the_same(tmp_path, sandbox):
    seed = Individual("0.0", Genome.from_source(candidate("good")))  # declares TUNABLE = {"BLOCK": [64, 128, 256]}
    store = RunStore(tmp_path)
    spares = sandbox.spares  # the service keeps a warm worker per evaluation in flight: given back below
    service = EvaluationService([make_evaluator(trials=2, sandbox=sandbox)], store, parallel=2)
    try:
        first, _ = tune(Tuner(service, store.optuna_url, trials=3, parallel=2), seed)
        calls = store.evaluation_count()
        again, _ = tune(Tuner(service, store.optuna_url, trials=3, parallel=2), seed)  # as a resumed run does
    finally:
        service.close()
        sandbox.spares = spares
    assert first.ok and again.genome == first.genome and again.result.to_dict() == first.result.to_dict()
    assert store.evaluation_count() == calls  # every trial came from the store
    study = optuna.load_study(study_name="tune-0.0", storage=store.optuna_url)
    assert len(study.trials) == 3 and study.trials[0].params == seed.genome.params  # the operator's choice first


def test_failed_individuals_are_never_parents_while_a_correct_one_exists():
    import random

    genome = Genome.from_source(candidate("good"))
    ok = individual(genome, "ok", 2.0)
    failed = [individual(genome.with_params({"BLOCK": 64}), "incorrect", None, f"1.{i}") for i in range(5)]
    for strategy in (Tournament(3), EpsilonGreedy(0.5), UniformRandom()):
        parents = strategy(failed + [ok], failed + [ok], 20, random.Random(0))
        assert all(p is ok for p in parents), strategy
    assert failed[0].fitness.values[0] == float("inf")


def test_a_crossover_gets_two_distinct_parents_whenever_two_kernels_exist():
    import random

    genome = Genome.from_source(candidate("good"))
    fast, slow = individual(genome, "ok", 1.0, "1.0"), individual(genome.with_params({"BLOCK": 64}), "ok", 2.0, "1.1")
    broken = individual(genome.with_params({"BLOCK": 256}), "incorrect", None, "1.2")
    alone = [Tournament(2)([fast, slow], [], 2, random.Random(seed)) for seed in range(40)]
    assert any(a.key == b.key for a, b in alone)  # the plain tournament often picks one kernel twice
    for seed in range(40):
        a, b = DistinctParents(Tournament(2))([fast, slow, broken], [], 2, random.Random(seed))
        assert a.key != b.key and broken not in (a, b)
    assert DistinctParents(UniformRandom())([fast], [fast], 2, random.Random(0)) == [fast, fast]  # no other kernel


def test_survivors_hold_one_individual_per_kernel():
    from evo.evolution.search import _one_per_kernel

    genome = Genome.from_source(candidate("good"))
    old, same_kernel, other = (individual(genome, "ok", 1.0, "1.0"), individual(genome, "ok", 1.0, "2.0"),
                               individual(genome.with_params({"BLOCK": 64}), "ok", 2.0, "2.1"))
    assert _one_per_kernel([old, same_kernel, other]) == [old, other]  # the population keeps the one it had


def test_epsilon_greedy_draws_from_the_whole_archive():
    import random

    genome = Genome.from_source(candidate("good"))
    archive = [individual(genome.with_params({"BLOCK": b}), "ok", t, f"1.{b}")
               for b, t in ((64, 3.0), (128, 1.0), (256, 2.0))]
    greedy = EpsilonGreedy(0.0)(archive[:1], archive, 5, random.Random(0))
    assert all(p is archive[1] for p in greedy)  # the archive's best, though it is not in the population
    explore = EpsilonGreedy(1.0)(archive[:1], archive, 60, random.Random(0))
    assert {id(p) for p in explore} == {id(a) for a in archive}


@pytest.mark.slow
def test_multirun_sweeps_problems_and_writes_one_combined_page(tmp_path, monkeypatch):
    started = []  # the fork servers its jobs start: the first job's serves the second (fitness.workers.pool)
    monkeypatch.setattr(Zygote, "__init__", lambda self, *a, **k: (started.append(a), ZYGOTE_INIT(self, *a, **k))[1])
    proc = kernelevo("run", "--multirun", "problem=rmsnorm,row_softmax", "search.generations=0", *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(started) <= 1, started  # one per job before the pool; none where an earlier run gave one back
    assert SANDBOXES.idle and SANDBOXES.idle[-1].zygote_pid is not None  # back in the pool, its fork server up
    assert len(list(tmp_path.glob("outputs/multirun/*/*/*/best_kernel.py"))) == 2
    (sweep,) = tmp_path.glob("outputs/multirun/*/*")
    reports = sorted(sweep.glob("*/report.html"))
    assert len(reports) == 2
    table = proc.stdout[proc.stdout.index("[multirun] kernelevo multirun: 2 runs"):].splitlines()
    assert table[1].split() == ["problem", "status", "best", "seed", "(tuned)", "evaluations", "report"]
    for line, name, report in zip(table[2:4], ("rmsnorm", "row_softmax"), reports):  # one row per run, in job order
        assert line.startswith(f"problem={name} ") and " ok " in line and line.endswith(str(report))
    assert f"[multirun] combined report: {sweep / 'multirun.html'}" in proc.stdout
    page = (sweep / "multirun.html").read_text()
    for report in reports:
        assert f"<a href='{report.relative_to(sweep)}'>problem={report.parent.name.split('-', 1)[1]}</a>" in page


@pytest.mark.parametrize("override, message", [
    ("problem=no_such_problem", "problem=no_such_problem: no such option of the group problem"),
    ("problem.name=no_such_problem", "neither a bundled problem"),
    ("search.generations=-1", "search.generations must not be negative"),
    ("search.tuner.trials=0", "search.tuner.trials and search.tuner.parallel must be at least 1"),
    ("search.tuner.sampler=grid", "search.tuner.sampler='grid' is not a sampler; use one of tpe, random"),
    ("search.mu=0", "search.mu and search.lambda_ must be at least 1"),
])
def test_bad_overrides_get_a_clear_error(cli, override, message):
    code, out, err = cli("run", override)
    assert code != 0
    assert message in out + err


def test_resume_of_a_directory_without_a_run_says_so(cli, tmp_path):
    code, _, err = cli("resume", f"run_dir={tmp_path}")
    assert code == 2 and "holds no run" in err


@pytest.mark.slow
def test_islands_evolve_apart_and_the_best_migrate(tmp_path):
    proc = kernelevo("run", "problem=rmsnorm", *TINY, "search.islands=2", "search.migration_interval=1",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    islands = read_store(run_dir, lambda store: store.latest_checkpoint().islands)
    times = {ind.id: ind.rank for ind in read_store(run_dir, lambda store: store.individuals())}  # the ranking
    assert len(islands) == 2 and all(len(island) == 2 for island in islands)  # mu survivors each
    best = min((g for island in islands for g in island), key=lambda g: times[g])
    assert all(best in island for island in islands)  # the best of its island migrated to the other one


@pytest.mark.slow
def test_the_same_seed_and_measurements_give_the_same_lineage_with_1_or_4_workers(tmp_path):
    """Children in flight and evaluation workers change nothing the search decides: a run with 4 evaluation
    workers and 3 children at once, then the same config run with one of each on the first run's measurements
    (timings on the interpreter are wall-clock noise, so the second run must see the same ones). The tuner's batch
    (search.tuner.parallel) is the same in both: TPE learns between batches, so it is part of the search."""
    common = ["problem=elementwise_chain", "search.mu=2", "search.lambda_=3", "search.generations=2",
              "search.patience=null", "search.tuner.trials=3", "search.tuner.parallel=2", "fitness.trials=1",
              "fitness.timing.interpreter_reps=1"]
    wide = kernelevo("run", *common, "parallel=4", "search.parallel=3", "hydra.run.dir=wide", cwd=tmp_path)
    assert wide.returncode == 0, wide.stdout + wide.stderr
    measured = replay_measurements(tmp_path / "wide", tmp_path / "serial")
    serial = kernelevo("run", *common, "parallel=1", "search.parallel=1", "hydra.run.dir=serial", cwd=tmp_path)
    assert serial.returncode == 0, serial.stdout + serial.stderr
    assert lineage_of(tmp_path / "serial") == lineage_of(tmp_path / "wide")
    assert len(lineage_of(tmp_path / "wide")) == 1 + 2 * 3
    assert (tmp_path / "serial/best_kernel.py").read_text() == (tmp_path / "wide/best_kernel.py").read_text()
    assert log_counts(tmp_path / "serial")[1] == len(measured)  # the serial run asked for no kernel not measured
    assert_lineage_is_sound(read_store(tmp_path / "wide", lambda store: store.individuals()))


@pytest.mark.slow
def test_ctrl_c_ends_a_run_in_one_line_naming_resume_and_the_run_resumes_from_its_checkpoint(tmp_path):
    """Issue 26: Ctrl-C printed a 17-frame traceback. Now: one line saying what the run directory keeps and the
    command that continues it, exit code 130 (as a shell reports an interrupt), and that command works."""
    import threading

    args = [f"problem={PROBLEMS / 'scale_shift.py'}", f"problem.seed={CANDIDATES / 'good.py'}",  # no sizes check
            "search=tiny", "search.mu=1", "search.lambda_=4", "search.tuner.trials=3", "fitness.trials=1",
            "fitness.timing.interpreter_reps=1", "hydra.run.dir=D"]  # generation 1: seconds of work to interrupt
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "kernelevo.cli", "run", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=interruptible)
    guard = threading.Timer(120, proc.kill)  # a run that never gets there fails the test, not the suite
    guard.start()
    try:
        for line in proc.stdout:
            if "[kernelevo] gen   0" in line:  # generation 0 checkpointed; generation 1 under way
                os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: its whole process group
                break
        out, err = proc.communicate(timeout=60)
    finally:
        guard.cancel()
    run_dir = tmp_path / "D"
    assert proc.returncode == 130, out + err
    assert err.strip() == (f"kernelevo: interrupted; {run_dir} keeps its checkpoint of generation 0 and every "
                           f"evaluation that finished: continue with kernelevo resume run_dir={run_dir}")
    assert "Traceback" not in out and read_store(run_dir, lambda store: store.latest_checkpoint().generation) == 0
    resumed = kernelevo("resume", f"run_dir={run_dir}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"resuming {run_dir} from its checkpoint of generation 0" in resumed.stdout
    assert "[kernelevo] gen   1" in resumed.stdout and "gen   0" not in resumed.stdout
    assert log_counts(run_dir)[0] == log_counts(run_dir)[1]  # nothing evaluated twice across the interrupt
