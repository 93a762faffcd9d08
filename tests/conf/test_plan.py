"""Issue 46: one typed plan per command. The command line is composed once (Hydra composes nothing again for the
job) and turned once into the command's plan (``kernelevo.plans``), checked once; every layer gets its settings objects
from it. Counted here for `kernelevo run` on a bundled problem with the offline defaults, `bench` and `resume`, each
stopped where its work would begin."""
import pytest

from kernelevo.core.errors import KernelevoError


class Stop(KernelevoError):
    """Raised where a counted command has done what is counted: it ends as a config error would (exit 2)."""


@pytest.fixture
def counted(monkeypatch):
    """How many times the command line was composed (Hydra's compose, whoever asks: the validator, hydra.main, a
    job), typed into settings objects, planned as a run and checked as one."""
    import evo.runs.run
    import kernelevo.benching
    import kernelevo.plans
    from hydra._internal.hydra import Hydra

    calls = {"compose": 0, "typed": 0, "run_plan": 0, "check": 0}

    def count(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(Hydra, "compose_config", count("compose", Hydra.compose_config))
    typed, run_plan = count("typed", kernelevo.plans.typed), count("run_plan", kernelevo.plans.run_plan)
    for module in (kernelevo.plans, kernelevo.benching):  # each holds its own names of kernelevo.plans's
        for name, counter in (("typed", typed), ("run_plan", run_plan)):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counter)
    monkeypatch.setattr(evo.runs.run, "check_run_config", count("check", evo.runs.run.check_run_config))
    return calls


def stopped_at_the_store(monkeypatch, seen: list):
    """evo.runs.run.execute stopped where it opens the run store; `seen` gets the plan it was given."""
    import evo.runs.run

    real = evo.runs.run.execute

    def execute(plan, run_dir, checked, **kwargs):
        seen.append(plan)
        with monkeypatch.context() as patch:
            patch.setattr(evo.runs.run, "RunStore", lambda *args: (_ for _ in ()).throw(Stop("stopped at the store")))
            return real(plan, run_dir, checked, **kwargs)

    monkeypatch.setattr(evo.runs.run, "execute", execute)


def test_a_run_is_composed_once_and_planned_once(cli, tmp_path, counted, monkeypatch):
    """`kernelevo run` with the offline defaults: one composition (the validator's; Hydra's job runs on it), one
    plan, one check; the search is given the typed settings of the command line, not a config."""
    from evo.plan import RunPlan
    from evo.settings import SearchSettings

    seen = []
    stopped_at_the_store(monkeypatch, seen)
    code, out, err = cli("run", "problem=row_softmax", "search=tiny", "search.tuner.trials=2", "hydra.run.dir=R")
    assert code == 2 and err.startswith("kernelevo: error: stopped at the store"), out + err
    assert counted == {"compose": 1, "typed": 1, "run_plan": 1, "check": 1}
    (plan,) = seen
    assert isinstance(plan, RunPlan) and isinstance(plan.search, SearchSettings)
    assert plan.tuner.trials == 2 and plan.judge.problem.name == "row_softmax" and plan.llm is None
    assert plan.config["search"]["tuner"]["trials"] == 2  # what the run store keeps: the same config, resolved


def test_a_runs_plugins_are_made_once_into_its_plan(cli, monkeypatch):
    """Issue 67: the plan kept the plug-ins as config nodes (``Any``), and the evaluation backend was made twice: by
    the command line's check and again by the run. Each plug-in is made once, with the plan, which holds it; the
    run's evaluation service comes from that one backend."""
    from evo.evolution.strategy import Evolution
    from evo.service.evaluation import LocalEvaluators
    from operators.base import Operator

    made, asked = [], []

    def service(self, plan, store):
        asked.append((self, plan))
        raise Stop("stopped at the service")

    monkeypatch.setattr(LocalEvaluators, "__init__", lambda self: made.append(self))
    monkeypatch.setattr(LocalEvaluators, "service", service)
    code, out, err = cli("run", "problem=row_softmax", "search=tiny", "hydra.run.dir=R")
    assert code == 2 and err.startswith("kernelevo: error: stopped at the service"), out + err
    ((backend, plan),) = asked
    assert made == [backend] and plan.backend is backend
    assert isinstance(plan.strategy, Evolution) and plan.operators
    assert all(isinstance(op, Operator) for op in plan.operators)


def test_a_bench_is_composed_once_and_planned_once(cli, tmp_path, counted, monkeypatch):
    """`kernelevo bench`: its runs' plan is made and checked once, on the command line; the task runs on it."""
    import evo.benchmark.bench

    given = []

    def execute_bench(tasks, backend, bench_dir, on_row):
        given.append([task.name for task in tasks])
        raise evo.benchmark.bench.BenchError("stopped where the searches begin")

    monkeypatch.setattr(evo.benchmark.bench, "execute_bench", execute_bench)
    code, out, err = cli("bench", "bench.problems=[row_softmax,layernorm]", "search=tiny", "bench.dir=B")
    assert code == 2 and "kernelevo: error: stopped where the searches begin" in err, out + err
    assert given == [["row_softmax", "layernorm"]]
    assert counted == {"compose": 1, "typed": 1, "run_plan": 1, "check": 1}


def test_a_resume_is_composed_once_and_planned_once(cli, tmp_path, counted, monkeypatch):
    """`kernelevo resume`: the resume's own config composed once; the run's plan made once from the config its
    store kept, the budgets given applied."""
    from omegaconf import OmegaConf

    from evo.records.checkpoint import Checkpoint
    from evo.records.store import RunStore
    from kernelevo.validate import Validator

    config = OmegaConf.to_container(Validator("run", "config").check([])[0], resolve=True)
    config["search"].update(generations=5, patience=3, max_evaluations=None, wall_time_s=None)
    store = RunStore(tmp_path / "D")  # a run that stopped on patience after 5 generations
    store.set_meta("config", config)
    store.save_checkpoint(Checkpoint(5, stale=3, elapsed_s=10.0))
    store.close()
    for key in counted:
        counted[key] = 0
    seen = []
    stopped_at_the_store(monkeypatch, seen)
    code, out, err = cli("resume", "run_dir=D", "search.patience=null", "search.generations=8")
    assert code == 2 and err == "kernelevo: error: stopped at the store\n", out + err
    assert "search.generations 5 -> 8" in out
    # typed: the resume's own config, then the run's search (its budgets' check), then the whole run's plan
    assert counted == {"compose": 1, "typed": 3, "run_plan": 1, "check": 1}
    (plan,) = seen
    assert plan.search.budget.generations == 8 and plan.search.budget.patience is None


def test_resume_takes_every_budget_key_into_the_run_plan(cli, tmp_path, monkeypatch):
    """Issue 46: resume's keys are the budgets' own fields (kernelevo.config.schema.not_given). Each key its messages
    name (kernelevo.resuming.LIFT), and every other budget key, given with the generations and patience that let the
    run go on, is accepted and reaches the search's plan typed, as the settings of a new run would."""
    from dataclasses import fields

    from omegaconf import OmegaConf

    from evo.records.checkpoint import Checkpoint
    from evo.settings import Budget
    from evo.records.store import RunStore
    from kernelevo.resuming import LIFT
    from kernelevo.validate import Validator
    from operators.llm.settings import LLMBudget

    config = OmegaConf.to_container(Validator("run", "config").check(["llm=openai"])[0], resolve=True)
    config["search"].update(generations=5, patience=3)
    store = RunStore(tmp_path / "D")
    store.set_meta("config", config)
    store.save_checkpoint(Checkpoint(5, stale=3, elapsed_s=10.0))
    store.close()
    seen = []
    stopped_at_the_store(monkeypatch, seen)
    keys = [f"search.{f.name}" for f in fields(Budget)] + [f"llm.budget.{f.name}" for f in fields(LLMBudget)]
    assert {f"search.{key}" for key in LIFT} <= set(keys)
    for key in keys:
        given = {"search.generations": 9, "search.patience": None, key: 1000 if key != "search.patience" else None}
        code, out, err = cli("resume", "run_dir=D", *(f"{k}={'null' if v is None else v}" for k, v in given.items()))
        assert code == 2 and err == "kernelevo: error: stopped at the store\n", (key, out + err)
        plan = seen.pop()
        budgets = {**{f"search.{k}": v for k, v in vars(plan.search.budget).items()},
                   **{f"llm.budget.{k}": v for k, v in vars(plan.llm.budget).items()}}
        assert {k: budgets[k] for k in given} == given, key
