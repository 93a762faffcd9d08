"""A run, wired from a composed config: run store -> evaluation pool -> tuner -> operators -> seeds -> search ->
outcome.

``execute`` runs the search stored in a run directory: a new run, or (with the config
``kernelevo.resuming.resume_config`` reads back from the store, its budgets changed as asked) a resumed one. The
seeds are made by ``evo.seeding``; what the run prints, by ``evo.console``; the outcome it ends with
(``RunOutcome``, ``summary.json``), by ``evo.outcome``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from evo import full_size
from evo.evaluation import EvaluationService, evaluations_in_flight
from evo.console import print_generation, start_line, table
from evo.manifest import run_manifest
from evo.outcome import INTERPRETER_TIMES, RunOutcome, summarise
from evo.progress import Progress
from evo.report_html import write_report
from evo.search import Search, SearchSettings
from evo.seeding import make_seeds
from evo.store import RunStore
from evo.tuner import Tuner, tuner_options
from fitness.evaluator import Evaluator, start_up_under_lock
from fitness.from_config import check_fitness_config, settings_from_config
from operators.base import CURRENT_CHILD

log = logging.getLogger(f"kernelevo.{__name__}")

LOCAL_BACKEND = {"_target_": "evo.evaluation.LocalEvaluators"}  # a run saved before fitness.backend existed
SUPPLY_EVALUATORS = "supply_evaluators"  # meta: the evaluators a run started with (its supply: lambda_per_gpu)


def evaluation_backend(cfg: DictConfig):
    """The `fitness.backend` plug-in (conf/fitness/backend/): where the run's evaluators live. ValueError with the
    backend's own message when it cannot be made (Ray missing, a bad setting)."""
    try:
        return instantiate(cfg.fitness.backend or LOCAL_BACKEND)
    except InstantiationException as exc:
        raise ValueError(str(exc.__cause__ or exc)) from exc


def build_service(cfg: DictConfig, store: RunStore) -> EvaluationService:
    return evaluation_backend(cfg).service(cfg, store)


def search_settings(cfg: DictConfig) -> SearchSettings:
    return SearchSettings.of(cfg.search)


def build_operators(cfg: DictConfig) -> list:
    return [instantiate(op) for op in cfg.operators.list]


def build_strategy(cfg: DictConfig):
    """The `search/strategy` plug-in (evo.strategy); evolution for a run saved before strategies existed."""
    from evo.strategy import Evolution

    return instantiate(cfg.search.strategy) if cfg.search.strategy else Evolution()


def build_team(cfg: DictConfig, store: RunStore, evaluator: Evaluator):
    """The LLM agents from the `llm` config, or None for an offline run (litellm is imported only here)."""
    if cfg.llm is None:
        return None
    from operators.llm.client import LLMClient, LLMSettings
    from operators.llm.context import ContextBuilder, ContextSettings
    from operators.llm.team import LLMTeam, TeamSettings

    llm = OmegaConf.to_container(cfg.llm, resolve=True)
    budget, spent = llm["budget"], store.llm_totals()  # a resumed run counts what it already spent
    max_calls, max_cost = budget["max_calls"], budget["max_cost_usd"]
    client = LLMClient(LLMSettings.from_config(llm), recorder=lambda call: _record_llm_call(store, call),
                       max_calls=None if max_calls is None else max_calls - spent["calls"],
                       max_cost_usd=None if max_cost is None else max_cost - spent["cost_usd"])
    from operators.llm.figures import judged_inputs

    context = ContextBuilder(ContextSettings(**llm["context"]), evaluator.target,
                             Path(evaluator.problem.path).read_text(),
                             judged_inputs(evaluator.problem, evaluator.target.dependence))
    return LLMTeam(client, context, TeamSettings.of(llm), evaluator.policy.to_dict(),
                   on_prompt=lambda role, chars, parts: _record_prompt(store, role, chars, parts),
                   tuner_trials=cfg.search.tuner.trials)


def _record_llm_call(store: RunStore, call: dict) -> None:
    """Store an LLM call, charged to the child whose operator call sent it."""
    child = CURRENT_CHILD.get()
    if child is not None:
        child.charge(call)
    store.add_llm_call({**call, "individual": child.id if child else None})


def _record_prompt(store: RunStore, role: str, chars: int, parts: dict) -> None:
    """Store the size of a prompt an agent is sent, per part, for the child whose operator call built it."""
    child = CURRENT_CHILD.get()
    store.add_prompt(role, chars, parts, child.id if child else None)


def measure_baselines(service: EvaluationService, store: RunStore) -> None:
    """On a GPU, time the baselines (``fitness.baselines``) once before the search starts, so no evaluation waits
    for them and the search's figures (evaluations per hour, GPU busy) exclude them; read from the machine's cache
    when an earlier run measured them (``fitness.baseline_cache``)."""
    evaluator = service.evaluators[0]
    if evaluator.on_gpu and store.get_meta("baseline_wall_s") is None:
        start = time.perf_counter()
        baseline = evaluator.baseline()
        store.set_meta("baseline_wall_s", time.perf_counter() - start)
        how = f"read from {baseline.cached}" if baseline.cached else "measured"
        log.info(f"baselines {how} in {time.perf_counter() - start:.1f} s: "
                 + ", ".join(f"{name} {state}" for name, state in baseline.status.items()))


def within_llm_budget(settings: SearchSettings, operators: list, cfg: DictConfig) -> SearchSettings:
    """Fewer children in flight where the LLM call budget cannot carry them all, each reserving its calls (plan,
    code, debugger's tries: ``operators.llm.operators.children_in_flight``); each then sees every child before those
    in flight (staleness no larger), so a small budget buys depth, not more plans."""
    from operators.llm.operators import children_in_flight

    cap = children_in_flight(operators, cfg.llm.budget.max_calls) if cfg.llm is not None else None
    if cap is None or cap >= settings.children_in_flight:
        return settings
    return replace(settings, parallel=cap, staleness=min(settings.window, cap))


@dataclass(frozen=True)
class CheckedRun:
    """A run's config as ``check_run_config`` checked it: the parts it built, handed to ``execute`` (built once)."""
    settings: SearchSettings
    operators: list
    strategy: Any


def check_run_config(cfg: DictConfig) -> CheckedRun:
    """Everything about a run's config that can be checked before anything is written or started (the command line
    runs it before Hydra makes the run directory, once per command); what the run is made of. Raises ValueError."""
    settings, operators = search_settings(cfg), build_operators(cfg)
    settings = within_llm_budget(settings, operators, cfg)
    strategy = build_strategy(cfg)
    strategy.check(settings), strategy.usable(operators)
    tuner_options(cfg.search.tuner)
    evaluations_in_flight(cfg.parallel)
    check_fitness_config(cfg)
    evaluation_backend(cfg)  # its settings; Ray installed when chosen
    llm = OmegaConf.to_object(cfg.llm) if cfg.llm is not None else None  # its checks (conf.schema.LLMConfig)
    from operators.llm.check import uses_llm  # LLM operators need an `llm=` (no litellm imported here)

    uses_llm(operators, OmegaConf.to_container(cfg.llm) if llm is not None else {},
             llm.initialise if llm is not None else False)
    return CheckedRun(settings, operators, strategy)


def execute(cfg: DictConfig, run_dir: Path, checked: CheckedRun, tag: str = "") -> RunOutcome:
    """Run or resume the search stored in run_dir (its config `cfg`, as `check_run_config` found it: `checked`),
    print progress and the outcome, write the best kernel, the outcome (summary.json) and the report. `tag`: what
    names this run in its progress lines (a sweep's seed)."""
    settings, operators = checked.settings, checked.operators
    store = RunStore(run_dir)
    store.set_meta("config", OmegaConf.to_container(cfg, resolve=True))
    service, tuner = build_service(cfg, store), None
    try:
        settings = supplied(settings, store, len(service.evaluators))
        options = tuner_options(cfg.search.tuner)
        tuner = Tuner(service, store.optuna_url, seed=cfg.search.seed, store=store, **options,
                      seed_parallel=settings.seed_batch(options["parallel"], options["trials"]))
        evaluator = service.evaluators[0]
        store.set_meta("start_up_under_lock", start_up_under_lock(settings_from_config(cfg.fitness), service.profile))
        log.info(start_line(evaluator, service.parallel, settings.children_in_flight, run_dir, settings.scale))
        if settings.children_in_flight < search_settings(cfg).children_in_flight:
            from operators.llm.operators import calls_per_child

            log.info(f"llm.budget.max_calls={cfg.llm.budget.max_calls} carries "
                     f"{settings.children_in_flight} children in flight (of {search_settings(cfg).children_in_flight}),"
                     f" each reserving its {calls_per_child(operators)} calls (plan, code, debugger's tries)")
        measure_baselines(service, store)
        team = build_team(cfg, store, evaluator)
        seeds = make_seeds(cfg, team, service, run_dir)
        sizes_check = full_size.SizesCheck.plan(cfg, evaluator, seeds) if not evaluator.on_gpu \
            else None
        search = Search(seeds, operators, tuner, store, settings,
                        partial(print_generation, interpreter=not evaluator.on_gpu, tag=tag),
                        selection=instantiate(cfg.search.selection), team=team, strategy=checked.strategy)
        stop_reason, window, busy = run_search(search, service, store, settings, sizes_check)
        store.set_meta("manifest", run_manifest(cfg, evaluator))
        if sizes_check is not None:  # the best must run at other sizes than the test sizes, in the run's sandbox
            sizes_check.judge(store, store.latest_checkpoint(), service.parallel, evaluator.sandbox)
    finally:
        if tuner is not None:
            tuner.close()
        service.close()
    outcome = conclude(store, stop_reason, busy, window)
    print(table(outcome), flush=True)
    print(f"  report: {write_report(run_dir)}", flush=True)
    return outcome


def supplied(settings: SearchSettings, store: RunStore, evaluators: int) -> SearchSettings:
    """The search's settings on its `evaluators` (``SearchSettings.on_evaluators``): the count it started with,
    kept in the store, so a resumed run (on any number of GPUs) continues the lineage it began."""
    started = store.get_meta(SUPPLY_EVALUATORS)
    if started is None:
        store.set_meta(SUPPLY_EVALUATORS, evaluators)
    elif started != evaluators and settings.lambda_per_gpu:
        log.info(f"this run started on {started} evaluators and resumes on {evaluators}: it keeps the "
                 f"supply it started with ({started} x search.lambda_ children a generation), so its lineage goes on")
    return settings.on_evaluators(started or evaluators)


def run_search(search: Search, service: EvaluationService, store: RunStore, settings: SearchSettings,
               sizes_check: full_size.SizesCheck | None) -> tuple[str, tuple, float | None]:
    """Run the search with its progress shown: why it stopped, its (start, end) wall-clock times and the share of
    them its GPUs were busy (None: not sampled). `sizes_check`: on the interpreter, its plan (None on a GPU)."""
    if sizes_check is not None:
        log.info(sizes_check.start_line())
    started = time.time()
    with Progress(search, service, store, settings.budget, gpus=service.local_gpus,
                  time_label=INTERPRETER_TIMES if sizes_check is not None else "") as progress:
        stop_reason = search.run()["stop_reason"]
    window = (started, time.time())
    return stop_reason, window, progress.sampler.busy(*window) if progress.sampler is not None else None


def conclude(store: RunStore, stop_reason: str, busy: float | None, window: tuple) -> RunOutcome:
    """The run's outcome (with the verdict at other sizes, on the interpreter, that the store holds): written as
    summary.json, with the best kernel's file; closes the store."""
    checkpoint = store.latest_checkpoint()
    outcome = summarise(store, checkpoint, stop_reason, busy, window)
    if outcome.best_id:
        best = store.individual(outcome.best_id).genome.rendered()
        Path(outcome.best_file).write_text(full_size.flagged(best, outcome.sizes_check))
    outcome.write(store.run_dir)
    store.close()
    return outcome
