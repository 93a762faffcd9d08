"""What a run on the CPU interpreter shows and keeps: a run on a file is named after it, its figures are
interpreter wall-clock times and never speed-ups, its Optuna studies open with Optuna's own API (and so in
optuna-dashboard), and `resume` extends a finished run's budget without repeating an evaluation."""
import json
import re

import optuna
import pytest

from conftest import CANDIDATES, PROBLEMS, kernelevo, read_store, run_dir_of

TINY = ["search=tiny", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]
FILE_RUN = [f"problem={PROBLEMS / 'scale_shift.py'}", f"problem.seed={CANDIDATES / 'good.py'}", *TINY]


@pytest.fixture(scope="module")
def file_run(tmp_path_factory):
    """(output, run directory) of a tiny run on a KernelBench-format file with a seed of its own."""
    cwd = tmp_path_factory.mktemp("file_run")
    proc = kernelevo("run", *FILE_RUN, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, cwd / run_dir_of(proc.stdout)


@pytest.mark.slow
def test_a_run_on_a_file_is_named_after_the_problem(file_run):
    _, run_dir = file_run
    assert run_dir.name.endswith("-scale_shift") and run_dir.parent.parent.name == "runs", run_dir


@pytest.mark.slow
def test_interpreter_runs_print_times_labelled_as_such_and_no_speed_up(file_run):
    output, run_dir = file_run
    assert not re.search(r"[0-9]x\b", output) and "speed-up vs" not in output  # no ratio of wall-clock noise
    assert re.search(r"\n  speed-ups +none on Triton's CPU interpreter", output)
    assert re.search(r"\n  best kernel +correct \(2/2 trials\)\n", output)
    assert "best kernel time (interpreter wall-clock)" in output
    assert all("ranked by Triton launches: best " in line for line in output.splitlines() if "] gen " in line)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["timer"] == "interpreter"
    assert summary["speedup_vs_eager"] is None and summary["speedup_vs_compile"] is None
    assert summary["speedup_vs_max_autotune"] is None and summary["speedup_vs_best"] is None
    assert summary["baseline_status"] == {"eager": "not_measured", "compile": "not_measured",
                                          "max_autotune": "not_measured"}
    manifest = summary["manifest"]  # what the figures were measured on and with
    assert manifest["gpu"].startswith("none") and manifest["policy"] == "triton"
    assert manifest["seeds"] == {"search": [0], "fitness": 0} and manifest["baselines"] == summary["baseline_status"]
    assert manifest["torch"] and manifest["triton"] and manifest["commit"]
    assert re.search(r"\n  measured with +none: Triton's CPU interpreter, driver none", output)


@pytest.mark.slow
def test_the_runs_optuna_studies_load_with_optunas_public_api(file_run):
    """run.db is an Optuna RDB storage: `optuna-dashboard sqlite:///RUN_DIR/run.db`, which the run prints, shows one
    study per tuned individual, its trials those the run evaluated."""
    output, run_dir = file_run
    url = re.search(r"\n  tuning studies +optuna-dashboard (\S+)\n", output).group(1)  # as the run says
    assert url == f"sqlite:///{(run_dir / 'run.db').resolve()}"
    studies = {s.study_name: s for s in optuna.get_all_study_summaries(storage=url)}
    individuals = read_store(run_dir, lambda store: store.individuals())
    evaluations = read_store(run_dir, lambda store: store.evaluations())
    assert set(studies) == {f"tune-{ind.id}" for ind in individuals}
    for ind in individuals:
        study = optuna.load_study(study_name=f"tune-{ind.id}", storage=url)
        assert 1 <= len(study.trials) == studies[f"tune-{ind.id}"].n_trials <= 2  # search=tiny: 2 trials each
        evaluated = [t for t in study.trials if "eval_key" in t.user_attrs]
        assert evaluated and all(t.user_attrs["eval_key"] in evaluations for t in evaluated)
        assert study.best_value == pytest.approx(ind.rank) if ind.ok else True  # told by rank_value (8e39216)


@pytest.mark.slow
def test_resume_extends_the_generation_budget_repeating_nothing(tmp_path):
    first = kernelevo("run", *FILE_RUN, "hydra.run.dir=run", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = tmp_path / "run"
    done = read_store(run_dir, lambda store: (store.evaluation_count(), set(store.evaluations())))
    assert "1 generation done" in first.stdout

    resumed = kernelevo("resume", f"run_dir={run_dir}", "search.generations=3", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (f"resuming {run_dir} from its checkpoint of generation 1, {done[0]} evaluations done "
            f"(finished ones are not repeated); search.generations 1 -> 3") in resumed.stdout
    assert "gen   1" not in resumed.stdout and "[kernelevo] gen   2" in resumed.stdout
    calls, distinct, evaluations, checkpoint = read_store(run_dir, lambda store: (
        store.evaluation_count(), store.distinct_evaluation_count(), set(store.evaluations()),
        store.latest_checkpoint()))
    assert calls == distinct > done[0] and done[1] <= evaluations  # new evaluations, none repeated, none lost
    assert checkpoint.generation == 3 or "no improvement" in resumed.stdout
    assert read_store(run_dir, lambda store: store.get_meta("config")["search"]["generations"]) == 3
