"""A run, from a composed config: run store -> evaluation pool -> tuner -> operators -> search -> summary.

``execute`` runs the search stored in a run directory: a new run, or (with the config ``resume_config`` reads back
from the store, its budgets changed as asked) a resumed one. It prints one line per generation and, at the end, the
best kernel's figures and where its file is. The outcome it ends with (``RunSummary``, ``summary.json``) lives in
``evo.outcome``.
"""
from __future__ import annotations

import json
import math
import time
from functools import partial
from pathlib import Path

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from evo import full_size
from evo.evaluation import EvaluationService, evaluations_in_flight
from evo.manifest import run_manifest
from evo.outcome import INTERPRETER_TIMES, REWRITTEN_SEED, SUMMARY_FILE, RunSummary, summarise
from evo.progress import Progress
from evo.report import write_report
from evo.search import GenerationReport, Search
from evo.search_settings import Budget, SearchSettings
from evo.store import RunStore
from evo.tuner import Tuner, tuner_options
from fitness.evaluator import Evaluator, start_up_under_lock
from fitness.from_config import check_fitness_config, settings_from_config
from core.genome import Genome, evaluation_key
from fitness.problem import INDUCTOR
from fitness.result import EvalResult, format_seconds
from operators.base import CURRENT_CHILD, ChildUsage
from seeds.inductor import variants_from_config

INITIALISE_MODES = (True, False, "from_seed")


LOCAL_BACKEND = {"_target_": "evo.evaluation.LocalEvaluators"}  # a run saved before fitness.backend existed


def evaluation_backend(cfg: DictConfig):
    """The `fitness.backend` plug-in (conf/fitness/backend/): where the run's evaluators live. ValueError with the
    backend's own message when it cannot be made (Ray missing, a bad setting)."""
    try:
        return instantiate(cfg.fitness.get("backend") or LOCAL_BACKEND)
    except InstantiationException as exc:
        raise ValueError(str(exc.__cause__ or exc)) from exc


def build_service(cfg: DictConfig, store: RunStore) -> EvaluationService:
    return evaluation_backend(cfg).service(cfg, store)


def search_settings(cfg: DictConfig) -> SearchSettings:
    s = cfg.search
    budget = Budget(generations=s.generations, max_evaluations=s.get("max_evaluations"), max_gpu_s=s.get("max_gpu_s"),
                    wall_time_s=s.get("wall_time_s"), patience=s.get("patience"))
    return SearchSettings(mu=s.mu, lambda_=s.lambda_, hall_of_fame=s.get("hall_of_fame", 5), seed=s.seed,
                          islands=s.get("islands", 1), migration_interval=s.get("migration_interval", 2),
                          migration_size=s.get("migration_size", 1), parallel=s.get("parallel"),
                          staleness=s.get("staleness"), budget=budget)


def build_operators(cfg: DictConfig) -> list:
    return [instantiate(op) for op in cfg.operators.list]


def build_strategy(cfg: DictConfig):
    """The `search/strategy` plug-in (evo.strategy); evolution for a run saved before strategies existed."""
    from evo.strategy import Evolution

    return instantiate(cfg.search.strategy) if cfg.search.get("strategy") else Evolution()


def build_team(cfg: DictConfig, store: RunStore, evaluator: Evaluator):
    """The LLM agents from the `llm` config, or None for an offline run (litellm is imported only here)."""
    llm = OmegaConf.to_container(cfg.llm, resolve=True) if cfg.get("llm") else {}
    if not llm.get("provider"):
        return None
    from operators.llm.client import LLMClient, LLMSettings
    from operators.llm.context import ContextBuilder, ContextSettings
    from operators.llm.team import LLMTeam, RoleSettings, TeamSettings

    settings = LLMSettings.from_config(llm)
    budget, spent = llm.get("budget") or {}, store.llm_totals()  # a resumed run counts what it already spent
    max_calls = budget.get("max_calls")
    max_cost = budget.get("max_cost_usd")
    client = LLMClient(settings, recorder=lambda call: _record_llm_call(store, call),
                       max_calls=None if max_calls is None else max_calls - spent["calls"],
                       max_cost_usd=None if max_cost is None else max_cost - spent["cost_usd"])
    context = ContextBuilder(ContextSettings(**llm.get("context", {})), evaluator.target,
                             Path(evaluator.problem.path).read_text())
    roles = {name: RoleSettings(**(role or {})) for name, role in (llm.get("roles") or {}).items()}
    team_settings = TeamSettings(roles=roles, parse_retries=llm.get("parse_retries", 2),
                                 max_plan_steps=llm.get("max_plan_steps", 4),
                                 edit_format=llm.get("edit_format", "file"))
    return LLMTeam(client, context, team_settings, evaluator.policy.to_dict(),
                   on_prompt=lambda role, chars, parts: _record_prompt(store, role, chars, parts))


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


def seed_genomes(cfg: DictConfig, team, service: EvaluationService, run_dir: Path) -> list[tuple[Genome, str]]:
    """Generation 0's genomes and who made each, the seed first. The seed: torch.compile's kernels with
    problem.seed=inductor or when the problem has no seed of its own (then also one seed per variant of Inductor's
    options, ``inductor.variants``, that writes other kernels), else the problem's seed. With an LLM team,
    ``llm.initialise``: true, the initialiser agent writes the first kernel from the reference alone; from_seed, it
    rewrites the seed for speed (so an LLM run starts from compile's kernels too); false, the seed as it is."""
    evaluator = service.evaluators[0]
    mode = cfg.llm.get("initialise", False) if team is not None else False  # checked by check_run_config
    if mode is True:
        return [(Genome.from_source(_initialise(team)), "initialiser")]
    if cfg.problem.get("seed") == INDUCTOR or evaluator.problem.seed_path is None:
        captured = evaluator.inductor_seeds(run_dir, variants_from_config(cfg))
        (made_by, source), others = next(iter(captured.items())), list(captured.items())[1:]
    else:
        (source, made_by), others = (evaluator.problem.seed_source(), "seed"), []
    if mode == "from_seed":
        origin = "torch.compile's Triton, converted" if made_by == INDUCTOR else "the problem's seed kernel"
        measured = service.evaluate(source, label=made_by)[1]  # the starting kernel's figures, for the initialiser
        rewrite = _initialise(team, source, origin, measured)
        check = service.evaluate(rewrite, label="initialiser")[1]  # a broken rewrite must not replace a working seed
        if check.ok:  # the starting kernel is the rewrite; the seed, what made it and its time, stay on record
            service.store.set_meta(REWRITTEN_SEED, {"made_by": made_by, "key": evaluation_key(source)})
            source, made_by = rewrite, "initialiser"
        else:
            print(f"[kernelevo] the initialiser's rewrite of the seed is not usable ({check.status}: "
                  f"{check.reason[:300]}); starting from the seed ({made_by})", flush=True)
    return [(Genome.from_source(source), made_by)] + [(Genome.from_source(s), by) for by, s in others]


def _initialise(team, seed: str | None = None, origin: str = "", measured: EvalResult | None = None) -> str:
    token = CURRENT_CHILD.set(ChildUsage("0.0"))  # the initialiser's calls are charged to generation 0's seed
    try:
        return team.initialise(seed, origin, measured)
    finally:
        CURRENT_CHILD.reset(token)


def print_generation(report: GenerationReport, interpreter: bool = False) -> None:
    best = "n/a" if math.isinf(report.best_s) else format_seconds(report.best_s)
    median = "n/a" if math.isinf(report.median_s) else format_seconds(report.median_s)
    mark = " *" if report.improved else ""
    label = f"{INTERPRETER_TIMES}: " if interpreter else ""
    print(f"[kernelevo] gen {report.generation:3d} | evaluations {report.evaluations:4d} | {label}best {best}{mark} | "
          f"median {median} | correct {report.correct}/{report.size} | {report.elapsed_s:.1f} s", flush=True)


def measure_baselines(service: EvaluationService, store: RunStore) -> None:
    """On a GPU, time the baselines (``fitness.baselines``) once before the search starts, so no evaluation waits
    for them and the search's figures (evaluations per hour, GPU busy) exclude them."""
    evaluator = service.evaluators[0]
    if evaluator.on_gpu and store.get_meta("baseline_wall_s") is None:
        start = time.perf_counter()
        evaluator.baseline()
        store.set_meta("baseline_wall_s", time.perf_counter() - start)
        status = evaluator.baseline().status
        print(f"[kernelevo] baselines measured in {time.perf_counter() - start:.1f} s: "
              + ", ".join(f"{name} {state}" for name, state in status.items()), flush=True)


def check_run_config(cfg: DictConfig) -> tuple[SearchSettings, list]:
    """Everything about a run's config that can be checked before anything is written or started (the command line
    runs it before Hydra makes the run directory); the search settings and operators. Raises ValueError."""
    settings, operators = search_settings(cfg), build_operators(cfg)
    strategy = build_strategy(cfg)
    strategy.check(settings), strategy.usable(operators)
    tuner_options(cfg.search.tuner)
    evaluations_in_flight(cfg.get("parallel", "auto"))
    check_fitness_config(cfg)
    evaluation_backend(cfg)  # its settings; Ray installed when chosen
    mode = cfg.get("llm", {}).get("initialise", False)
    if mode not in INITIALISE_MODES:
        raise ValueError(f"llm.initialise={mode!r}: use true (write the first kernel from the reference), "
                         f"from_seed (rewrite the seed) or false (start from the seed)")
    from operators.llm.check import uses_llm  # LLM operators need an `llm=` (no litellm imported here)

    uses_llm(operators, OmegaConf.to_container(cfg.llm) if cfg.get("llm") else {}, mode)
    return settings, operators


def execute(cfg: DictConfig, run_dir: Path) -> RunSummary:
    """Run or resume the search stored in run_dir, print progress and the summary, write the best kernel."""
    settings, operators = check_run_config(cfg)  # bad config fails before anything starts
    store = RunStore(run_dir)
    store.set_meta("config", OmegaConf.to_container(cfg, resolve=True))
    service, tuner = build_service(cfg, store), None
    try:
        tuner = Tuner(service, store.optuna_url, seed=cfg.search.seed, store=store, **tuner_options(cfg.search.tuner))
        evaluator = service.evaluators[0]
        store.set_meta("start_up_under_lock", start_up_under_lock(settings_from_config(cfg.fitness), service.profile))
        memory = f" ({evaluator.memory_slots} at a time in the problem's GPU memory)" if evaluator.memory_slots else ""
        print(f"[kernelevo] {evaluator.describe()}; {service.parallel} evaluations{memory} and "
              f"{settings.children_in_flight} children in flight; run dir {run_dir}", flush=True)
        measure_baselines(service, store)
        team = build_team(cfg, store, evaluator)
        seeding = time.perf_counter()
        seeds = seed_genomes(cfg, team, service, run_dir)
        if store.get_meta("seed_wall_s") is None:  # the first call's: a resume makes them again from caches
            store.set_meta("seed_wall_s", time.perf_counter() - seeding)
        interpreter = not evaluator.on_gpu
        sizes_check = full_size.SizesCheck.plan(cfg, evaluator, [by for _, by in seeds]) if interpreter else None
        if sizes_check is not None:
            print(sizes_check.start_line(), flush=True)
        search = Search(seeds, operators, tuner, store, settings, partial(print_generation, interpreter=interpreter),
                        selection=instantiate(cfg.search.selection), team=team, strategy=build_strategy(cfg))
        started = time.time()
        with Progress(search, service, store, settings.budget, gpus=service.local_gpus,
                      time_label=INTERPRETER_TIMES if interpreter else "") as progress:
            state = search.run()
        window = (started, time.time())
        busy = progress.sampler.busy(*window) if progress.sampler is not None else None
        store.set_meta("manifest", run_manifest(cfg, evaluator))
    finally:
        if tuner is not None:
            tuner.close()
        service.close()
    if sizes_check is not None:
        sizes_check.judge(store, state, service.parallel)  # the best must run at other sizes than the test sizes
    summary = summarise(store, state)
    summary.search_window, summary.gpu_busy = window, busy
    if summary.best is not None:
        summary.best_file.write_text(full_size.flagged(summary.best.genome.rendered(), summary.sizes_check))
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary.record(), indent=1) + "\n")
    store.close()
    print(summary.table(), flush=True)

    print(f"  report: {write_report(run_dir)}", flush=True)
    return summary


def saved_config(run_dir: Path) -> DictConfig:
    """The config a run was started with (or last resumed with), from its store."""
    store = RunStore(run_dir, create=False)
    config = store.get_meta("config")
    store.close()
    if config is None:
        raise ValueError(f"{run_dir}: the run store has no saved config; it was not made by `kernelevo run`")
    return OmegaConf.create(config)


def resume_config(run_dir: Path, changes: dict) -> DictConfig:
    """The run's saved config with `changes` (budgets: `search.generations` -> 10, ...) applied; prints the
    checkpoint the run resumes from and what changed."""
    cfg = saved_config(run_dir)
    store = RunStore(run_dir, create=False)
    checkpoint, calls = store.latest_checkpoint(), store.evaluation_count()
    store.close()
    changed = []
    for key, value in changes.items():
        before = OmegaConf.select(cfg, key, default=None)
        if before != value:
            OmegaConf.update(cfg, key, value, force_add=True)
            changed.append(f"{key} {before} -> {value}")
    where = (f"its checkpoint of generation {checkpoint['generation']}" if checkpoint is not None
             else "the start (no generation was finished)")
    print(f"[kernelevo] resuming {run_dir} from {where}, {calls} evaluations done (finished ones are not repeated)"
          + (f"; {', '.join(changed)}" if changed else ""), flush=True)
    return cfg
