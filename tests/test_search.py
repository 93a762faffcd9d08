"""The search on the CPU interpreter: end-to-end runs, kill and resume, Optuna studies that continue, bad overrides."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from conftest import candidate, make_evaluator
from evo.evaluation import EvaluationService
from evo.genome import Genome
from evo.store import RunStore
from evo.selection import EpsilonGreedy, Tournament, UniformRandom
from evo.toolbox import make_individual
from evo.tuner import Tuner

TINY = ["search=tiny", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]


def kernelevo(*args, cwd, wait=True):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "kernelevo.cli", *args]
    if not wait:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def run_dir_of(output: str) -> Path:
    line = next(l for l in output.splitlines() if "run dir " in l)
    return Path(line.split("run dir ", 1)[1].strip())


def log_counts(run_dir: Path) -> tuple[int, int]:
    db = sqlite3.connect(run_dir / "run.db")
    calls = db.execute("SELECT COUNT(*) FROM evaluation_log").fetchone()[0]
    distinct = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    db.close()
    return calls, distinct


def test_run_produces_a_verified_best_kernel_and_a_report(tmp_path):
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
    with make_evaluator(problem="rmsnorm", size_preset="test") as ev:  # the best kernel passes a fresh evaluation
        assert ev.evaluate(best.read_text()).status == "ok"
    report = kernelevo("report", f"run_dir={run_dir}", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = (run_dir / "report.md").read_text()
    assert "## Lineage of the best kernel" in text and "| 0 | seed |" in text
    assert (run_dir / "fitness.png").stat().st_size > 1000


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
    db = sqlite3.connect(run_dir / "run.db")
    done_before = {k for (k,) in db.execute("SELECT key FROM evaluations")}
    db.close()
    assert len(done_before) >= before + 2

    resumed = kernelevo("resume", f"run_dir={run_dir}", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "[kernelevo] gen   3" in resumed.stdout and "gen   0" not in resumed.stdout
    calls, distinct = log_counts(run_dir)
    assert calls == distinct  # no evaluation was repeated ...
    db = sqlite3.connect(run_dir / "run.db")
    done_after = {k for (k,) in db.execute("SELECT key FROM evaluations")}
    assert done_before <= done_after  # ... and none was lost
    assert db.execute("SELECT MAX(generation) FROM checkpoints").fetchone()[0] == 3
    db.close()


def test_a_resumed_optuna_study_continues(tmp_path):
    genome = Genome.from_source(candidate("good"))  # declares TUNABLE = {"BLOCK": [64, 128, 256]}
    store = RunStore(tmp_path)
    service = EvaluationService([make_evaluator(trials=2)], store)
    try:
        first = Tuner(service, store.optuna_url, trials=2).tune(genome)
        calls_after_first = store.evaluation_count()
        second = Tuner(service, store.optuna_url, trials=3).tune(genome)
    finally:
        service.close()
    study = optuna.load_study(study_name=f"tune-{genome.id}", storage=store.optuna_url)
    assert len(study.trials) == 3  # two from the first tuner, one more from the resumed one
    assert first.result.ok and second.result.ok
    assert store.evaluation_count() - calls_after_first <= 1
    assert study.trials[0].params == genome.params  # the operator's own choice was tried first


def test_failed_individuals_are_never_parents_while_a_correct_one_exists():
    import random

    genome = Genome.from_source(candidate("good"))
    ok = make_individual(genome, "k1", "ok", 2.0)
    failed = [make_individual(genome.with_params({"BLOCK": 64}), f"f{i}", "incorrect", None) for i in range(5)]
    for strategy in (Tournament(3), EpsilonGreedy(0.5), UniformRandom()):
        parents = strategy(failed + [ok], failed + [ok], 20, random.Random(0))
        assert all(p is ok for p in parents), strategy
    assert failed[0].fitness.values[0] == float("inf")


def test_epsilon_greedy_draws_from_the_whole_archive():
    import random

    genome = Genome.from_source(candidate("good"))
    archive = [make_individual(genome.with_params({"BLOCK": b}), str(b), "ok", t)
               for b, t in ((64, 3.0), (128, 1.0), (256, 2.0))]
    greedy = EpsilonGreedy(0.0)(archive[:1], archive, 5, random.Random(0))
    assert all(p is archive[1] for p in greedy)  # the archive's best, though it is not in the population
    explore = EpsilonGreedy(1.0)(archive[:1], archive, 60, random.Random(0))
    assert {id(p) for p in explore} == {id(a) for a in archive}


def test_multirun_sweeps_problems(tmp_path):
    proc = kernelevo("run", "--multirun", "problem=rmsnorm,row_softmax", "search.generations=0", *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list(tmp_path.glob("multirun/*/*/*/best_kernel.py"))) == 2


@pytest.mark.parametrize("override, message", [
    ("problem=no_such_problem", "Could not find 'problem/no_such_problem'"),
    ("problem.name=no_such_problem", "neither a bundled problem"),
    ("search.generations=-1", "search.generations must not be negative"),
    ("search.tuner.trials=0", "search.tuner.trials must be at least 1"),
    ("search.mu=0", "search.mu and search.lambda_ must be at least 1"),
])
def test_bad_overrides_get_a_clear_error(tmp_path, override, message):
    proc = kernelevo("run", override, cwd=tmp_path)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


def test_resume_of_a_directory_without_a_run_says_so(tmp_path):
    proc = kernelevo("resume", f"run_dir={tmp_path}", cwd=tmp_path)
    assert proc.returncode == 2 and "holds no run" in proc.stderr


def test_islands_evolve_apart_and_the_best_migrate(tmp_path):
    proc = kernelevo("run", "problem=rmsnorm", *TINY, "search.islands=2", "search.migration_interval=1",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = sqlite3.connect(run_dir_of(proc.stdout) / "run.db")
    state = json.loads(db.execute("SELECT state FROM checkpoints ORDER BY generation DESC LIMIT 1").fetchone()[0])
    times = dict(db.execute("SELECT genome_id, time_s FROM individuals").fetchall())
    db.close()
    islands = state["islands"]
    assert len(islands) == 2 and all(len(island) == 2 for island in islands)  # mu survivors each
    best = min((g for island in islands for g in island), key=lambda g: times[g])
    assert all(best in island for island in islands)  # the best of its island migrated to the other one
