"""The command line as a new user meets it: overrides checked against the config (typos named, with or without `+`),
one-line errors naming the fix for the command in use, nothing written by a command that fails its checks, the
sizes a problem file runs at on the interpreter, and `kernelevo list`."""
import json
import os

import pytest

from conftest import CANDIDATES, PROBLEMS, kernelevo
from kernelevo.core.errors import KernelevoError


@pytest.mark.parametrize("args, message", [
    (["run", "search.generatons=3"], "unknown key 'search.generatons' for `kernelevo run`; did you mean "
                                     "search.generations?"),
    (["run", "+search.generatons=3"], "did you mean search.generations?"),  # the `+` Hydra suggests changes nothing
    (["evaluate", "fitness.trails=2"], "did you mean fitness.trials?"),
    (["run", "llm.model=openai/gpt-4o"], "unknown key 'llm.model' for `kernelevo run`: it exists with "
                                         "llm=anthropic|local|openai"),
    (["run", "search=tinny"], "search=tinny: no such option of the group search; did you mean tiny?"),
    (["run", "fitness/polcy=strict-fp32"], "no config group 'fitness/polcy'; did you mean fitness/policy?"),
    (["run", "search.generations=many"], "search.generations=many: a number expected (default 5)"),
    (["resume", "run_dir=x", "search.mu=3"], "unknown key 'search.mu' for `kernelevo resume`; it takes run_dir, "
                                             "search.generations"),
    (["resume"], "`kernelevo resume` needs run_dir=..."),
    (["report"], "`kernelevo report` needs run_dir=..."),
    (["bench", "bench.rot=KB"], "did you mean bench.root?"),
    (["seed", "problem.sede=x.py"], "did you mean problem.seed?"),
])
def test_bad_overrides_fail_in_one_line_naming_the_closest_key(cli, tmp_path, args, message):
    assert message in refused(cli(*args))
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_run_that_fails_its_checks_writes_nothing(cli, tmp_path):
    for bad in (["search.generations=-1"], ["problem.name=no_such_problem"], ["problem.sizes.bogus=3"],
                ["device=cuda:7"]):
        code, out, err = cli("run", *bad)
        assert code == 2, out + err
        assert not list(tmp_path.iterdir()), f"{bad} left {list(tmp_path.rglob('*'))}"


def test_report_and_resume_of_a_missing_directory_are_errors_and_create_nothing(cli, tmp_path):
    missing = tmp_path / "no" / "run"
    for command in ("report", "resume"):
        assert "does not exist" in refused(cli(command, f"run_dir={missing}"))
    assert not (tmp_path / "no").exists()


def test_errors_name_the_fix_for_the_command_in_use(cli):
    """`evaluate` takes candidate=PATH; a file has no seed of its own, so it says how to get one."""
    text = refused(cli("evaluate", f"problem={PROBLEMS / 'scale_shift.py'}"))
    assert "pass candidate=PATH" in text and "kernelevo seed problem=" in text


def test_a_file_on_the_interpreter_is_shrunk_and_the_start_line_says_to_what(tmp_path):
    """KernelBench's sizes would time out on the interpreter: a file is shrunk by the stated rule
    (fitness/problems/sizes.py), sizes set on the command line (no `+` needed) are kept, and the start line shows the
    sizes used."""
    big = tmp_path / "big_scale_shift.py"
    big.write_text((PROBLEMS / "scale_shift.py").read_text().replace("batch_size = 4", "batch_size = 4096")
                   .replace("dim = 100", "dim = 393216"))
    out = tmp_path / "r.json"
    proc = kernelevo("evaluate", f"problem={big}", f"candidate={CANDIDATES / 'good.py'}", "problem.sizes.batch_size=3",
                     "fitness.trials=1", f"out={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    dim = result["sizes"]["dim"]
    assert result["status"] == "ok" and result["sizes"]["batch_size"] == 3 and 3 * dim <= 16384
    start = next(line for line in proc.stdout.splitlines() if line.startswith("[kernelevo] problem"))
    assert f"problem big_scale_shift at batch_size=3, dim={dim} (shrunk for the interpreter" in start
    assert "the file's sizes: dim=393216" in start and "set by you: batch_size=3" in start
    assert "time (interpreter wall-clock): " in proc.stdout and "eager" not in proc.stdout


@pytest.mark.parametrize("what, expected", [
    ("problems", ["row_softmax: torch.softmax(x, dim=1) over a [4096, 8192] fp32 tensor",
                  "sizes batch_size=4096, dim=8192; on the CPU interpreter batch_size=5, dim=2500"]),
    ("profiles", ["h100_sxm: NVIDIA H100 SXM5 80GB (gpu); 132 SMs", "cpu_interpreter:"]),
    ("policies", ["triton: KernelBench tolerances", "strict-fp32: fp32 within 1e-4", "kernelbench: KernelBench rules"]),
    ("operators", ["offline: The offline (no-LLM) operators", "ParamMutation (1)", "llm: The LLM team as operators"]),
])
def test_list_shows_what_there_is_to_choose_from(cli, what, expected):
    code, out, err = cli("list", what)
    assert code == 0, err
    for text in expected:
        assert text in out, out
    code, _, err = cli("list", "nope")
    assert code != 0 and "usage: kernelevo list {problems,profiles,policies,operators}" in err


def refused(done) -> str:
    """The one line a command refused before doing anything printed (exit code 2, nothing on stdout)."""
    code, out, err = done
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, done
    return err


def a_run(run_dir, problem="elementwise_chain"):
    """A run directory holding a run, as `kernelevo run` leaves one: its config and an evaluation in run.db."""
    from evo.records.store import RunStore
    from kernelevo.core.evaluation_record import EvalResult

    store = RunStore(run_dir)
    store.set_meta("config", {"problem": {"name": problem}})
    store.add_evaluation("k", EvalResult(status="ok", time_s=1.0))
    store.close()


def test_a_run_in_a_directory_that_holds_a_run_is_refused_naming_resume(cli, tmp_path):
    """Issue 26: a second `run` into the same hydra.run.dir printed the first run's table under the new problem's
    name and mixed the two in run.db. It is refused before Hydra writes anything there."""
    from conftest import read_store
    from evo.records.store import RunStore

    a_run(tmp_path / "D")
    before = sorted(p.name for p in (tmp_path / "D").iterdir())
    text = refused(cli("run", "problem=rmsnorm", "search=tiny", "hydra.run.dir=D"))
    assert f"{tmp_path / 'D'} holds a run already (problem elementwise_chain)" in text
    assert f"continue it with `kernelevo resume run_dir={tmp_path / 'D'}`" in text and "hydra.run.dir=NEW_DIR" in text
    assert sorted(p.name for p in (tmp_path / "D").iterdir()) == before  # no .hydra/, nothing of the new run
    assert read_store(tmp_path / "D", lambda store: (store.get_meta("config"), store.evaluation_count())) == \
        ({"problem": {"name": "elementwise_chain"}}, 1)
    (tmp_path / "M").mkdir()  # a store of measurements only (tests replay them into a new run) holds no run
    RunStore(tmp_path / "M").close()
    assert RunStore.saved_run(tmp_path / "M") is None and RunStore.saved_run(tmp_path / "none") is None


@pytest.mark.parametrize("args, message", [
    (["evaluate", "out=F/r.json", "hydra.run.dir=."], "cannot write out=F/r.json ({cwd}/F/r.json): {cwd}/F is a "
                                                     "file, not a folder"),  # relative to the output directory
    (["evaluate", "out={cwd}/F/r.json"], "cannot write out={cwd}/F/r.json: {cwd}/F is a file, not a folder; "
                                         "pass out=A_WRITABLE_PATH"),
    (["evaluate", "out={cwd}"], "cannot write out={cwd}: {cwd} is a folder, not a file"),
    (["seed", "problem=layernorm", "out={cwd}/F/seed.py"], "cannot write out={cwd}/F/seed.py: {cwd}/F is a file"),
    (["run", "hydra.run.dir=F/run"], "cannot write the output directory {cwd}/F/run: {cwd}/F is a file, not a "
                                     "folder; set hydra.run.dir=A_WRITABLE_DIR"),
    (["run", "-m", "problem=rmsnorm,layernorm", "hydra.sweep.dir=F/s"], "set hydra.sweep.dir=A_WRITABLE_DIR"),
    (["bench", "bench.problems=[rmsnorm]", "bench.dir=F"], "cannot write bench.dir=F: {cwd}/F is a file"),
])
def test_an_output_location_that_cannot_be_written_is_refused_before_anything_runs(cli, tmp_path, args, message):
    """Issue 26: `evaluate out=RO` evaluated, then lost the verdict in a raw OSError; `seed out=RO` failed after
    compiling. Every place a command writes is checked first: one line naming it and the fix, nothing done."""
    (tmp_path / "F").write_text("a file where a folder is needed")
    text = refused(cli(*(arg.format(cwd=tmp_path) for arg in args)))
    assert message.format(cwd=tmp_path) in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F"]  # no output directory made


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_named_as_such(cli, tmp_path):
    a_run(tmp_path / "run")
    for folder in (tmp_path / "ro", tmp_path / "run"):
        folder.mkdir(exist_ok=True)
        folder.chmod(0o555)
    try:
        assert f"cannot write out={tmp_path}/ro/r.json: {tmp_path}/ro is read-only" in refused(
            cli("evaluate", f"out={tmp_path}/ro/r.json"))
        assert f"cannot write into run_dir={tmp_path}/run: {tmp_path}/run is read-only; `kernelevo report` " \
               f"writes there" in refused(cli("report", f"run_dir={tmp_path}/run"))
    finally:
        for folder in (tmp_path / "ro", tmp_path / "run"):
            folder.chmod(0o755)


def test_a_resume_that_patience_would_stop_at_once_is_refused_saying_how_to_lift_it(cli, tmp_path):
    """Issue 26: `resume ... search.generations=6` of a run that stopped on patience printed "5 -> 6" and ran nothing,
    exit 0. The resume is refused, naming patience and how to lift it, and changes nothing in the run."""
    from conftest import read_store
    from evo.records.checkpoint import Checkpoint
    from evo.records.store import RunStore

    store = RunStore(tmp_path / "D")
    config = {"problem": {"name": "elementwise_chain"}, "search": {"generations": 5, "patience": 3, "mu": 4,
                                                                  "lambda_": 8, "seed": 0, "max_evaluations": None,
                                                                  "wall_time_s": None}}
    store.set_meta("config", config)
    store.save_checkpoint(Checkpoint(5, stale=3, elapsed_s=10.0))
    store.close()
    text = refused(cli("resume", "run_dir=D", "search.generations=6"))
    assert "resuming D with search.generations=6 would run nothing: search.patience=3 stops it at once: no " \
           "improvement in its last 3 generations (lift it: search.patience=null, or a value above 3)" in text
    kept = read_store(tmp_path / "D", lambda store: (store.get_meta("config"), store.latest_checkpoint()))
    assert kept == (config, Checkpoint(5, stale=3, elapsed_s=10.0))  # no budget changed, nothing resumed


def a_stopped_run(run_dir, config=None):
    """A run store as a run that stopped on patience after 5 generations leaves it: its config (`config`, or the
    search's budgets alone) and checkpoint."""
    from evo.records.checkpoint import Checkpoint
    from evo.records.store import RunStore

    store = RunStore(run_dir)
    config = config or {"problem": {"name": "elementwise_chain"}}
    config["search"] = {**config.get("search", {}), "generations": 5, "patience": 3, "max_evaluations": None,
                        "wall_time_s": None}
    store.set_meta("config", config)
    store.save_checkpoint(Checkpoint(5, stale=3, elapsed_s=10.0))
    store.close()


def test_resume_takes_every_budget_key_its_messages_name(cli, tmp_path):
    """Issue 46: `kernelevo resume run_dir=D search.max_gpu_s=10` was refused as an unknown key, while resume's own
    message told the user to raise search.max_gpu_s. Every budget key a message names (kernelevo.resuming.LIFT) and
    every field of the budgets is a key resume takes: here each one reaches the resume's own check (which refuses a
    resume that would run nothing, naming the value it was given), none is an unknown key."""
    from dataclasses import fields

    from evo.settings import Budget
    from kernelevo.resuming import LIFT
    from operators.llm.settings import LLMBudget

    a_stopped_run(tmp_path / "D", {"problem": {"name": "elementwise_chain"},
                                   "llm": {"provider": "openai", "model": "openai/gpt-4o"}})
    a_stopped_run(tmp_path / "offline")
    keys = [f"search.{f.name}" for f in fields(Budget)] + [f"llm.budget.{f.name}" for f in fields(LLMBudget)]
    assert {f"search.{key}" for key in LIFT} <= set(keys)
    assert ("llm.budget.max_calls: the run in offline has no llm settings to change (llm=none); leave "
            "llm.budget.max_calls out") in refused(cli("resume", "run_dir=offline", "llm.budget.max_calls=7"))
    for key in keys:
        text = refused(cli("resume", "run_dir=D", f"{key}=7"))
        assert f"resuming D with {key}=7" in text and "would run nothing" in text, text
    assert "search.max_gpu_s=10.0 would run nothing: its 5 generations are done" in refused(
        cli("resume", "run_dir=D", "search.max_gpu_s=10"))


class Stop(KernelevoError):
    """Raised where a counted command has done what is counted: it ends as a config error would (exit 2)."""


def test_a_run_and_a_resume_check_their_config_once(cli, tmp_path, monkeypatch):
    """Issue 46: `kernelevo run` checked its config before Hydra started and again in evo.runs.run.execute, building the
    search strategy twice more. The command line's check is the one: its strategy is the search's (the plan's, made
    once with it: kernelevo.plans)."""
    import evo.runs.run
    import kernelevo.plans

    calls = {"check": 0, "strategy": 0}
    check, strategy = evo.runs.run.check_run_config, kernelevo.plans.build_strategy

    def counted(name, real):
        def call(*args):
            calls[name] += 1
            return real(*args)
        return call

    def execute(cfg, run_dir, checked, **kwargs):  # evo.runs.run.execute, stopped where it opens the run store
        assert isinstance(checked, evo.runs.run.CheckedRun) and cfg.strategy.name == "evolution"
        with monkeypatch.context() as patch:
            patch.setattr(evo.runs.run, "RunStore", lambda *args: (_ for _ in ()).throw(Stop("stopped at the store")))
            return real_execute(cfg, run_dir, checked, **kwargs)

    real_execute = evo.runs.run.execute
    monkeypatch.setattr(evo.runs.run, "check_run_config", counted("check", check))
    monkeypatch.setattr(kernelevo.plans, "build_strategy", counted("strategy", strategy))
    monkeypatch.setattr(evo.runs.run, "execute", execute)
    assert "stopped at the store" in refused(cli("run", "hydra.run.dir=R"))
    assert calls == {"check": 1, "strategy": 1}

    calls.update(check=0, strategy=0)
    from kernelevo.validate import Validator
    from omegaconf import OmegaConf

    a_stopped_run(tmp_path / "D", OmegaConf.to_container(Validator("run", "config").check([])[0], resolve=True))
    code, out, err = cli("resume", "run_dir=D", "search.patience=null", "search.generations=8")
    assert code == 2 and "search.generations 5 -> 8" in out and err == "kernelevo: error: stopped at the store\n"
    assert calls == {"check": 1, "strategy": 1}
