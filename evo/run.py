"""A run, from a composed config: run store -> evaluation pool -> tuner -> operators -> search -> summary.

``execute`` runs the search stored in a run directory: a new run, or (with the config ``resume_config`` reads back
from the store, its budgets changed as asked) a resumed one. It prints one line per generation and, at the end, the
best kernel's figures and where its file is.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from evo import full_size
from evo.anytime import run_curve
from evo.evaluation import EvaluationService, evaluations_in_flight
from evo.manifest import manifest_line, run_manifest
from evo.progress import Progress
from evo.search import Budget, GenerationReport, Search, SearchSettings
from evo.store import RunStore
from evo.tuner import Tuner, describe_tuner, tuner_options
from fitness.baselines import BASELINES, speedup_rows
from fitness.evaluator import Evaluator, start_up_under_lock
from fitness.from_config import check_fitness_config, settings_from_config
from fitness.genome import Genome, evaluation_key
from fitness.individual import Individual
from fitness.problem import INDUCTOR
from fitness.result import TIMED_OUT, EvalResult, format_seconds, labels_text
from operators.base import CURRENT_CHILD, ChildUsage
from operators.inductor_seed import variants_from_config

BEST_KERNEL_FILE = "best_kernel.py"
SUMMARY_FILE = "summary.json"  # the run's outcome, written when it ends (RunSummary.record)
INITIALISE_MODES = (True, False, "from_seed")
REWRITTEN_SEED = "rewritten_seed"  # run store meta key: the seed the initialiser rewrote (llm.initialise=from_seed)


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


INTERPRETER_TIMES = "interpreter wall-clock"  # the label of every time measured on Triton's CPU interpreter


def print_generation(report: GenerationReport, interpreter: bool = False) -> None:
    best = "n/a" if math.isinf(report.best_s) else format_seconds(report.best_s)
    median = "n/a" if math.isinf(report.median_s) else format_seconds(report.median_s)
    mark = " *" if report.improved else ""
    label = f"{INTERPRETER_TIMES}: " if interpreter else ""
    print(f"[kernelevo] gen {report.generation:3d} | evaluations {report.evaluations:4d} | {label}best {best}{mark} | "
          f"median {median} | correct {report.correct}/{report.size} | {report.elapsed_s:.1f} s", flush=True)


@dataclass
class RunSummary:
    run_dir: Path
    best: Individual | None
    seed_result: EvalResult | None  # the seed as written (its declared defaults)
    tuned_seed_result: EvalResult | None  # the seed after tuning its own declared space
    stop_reason: str
    evaluations: int
    distinct_evaluations: int
    search_wall_s: float = 0.0  # the search's wall time, across resumes (baselines and seed capture excluded)
    baseline_wall_s: float = 0.0  # measuring eager and torch.compile, once, before the search
    seed_wall_s: float = 0.0  # making generation 0's kernels (torch.compile's capture, an initialiser), before it
    timeouts: int = 0  # evaluations that ran out of time (whole or compiling)
    gpu_busy: float | None = None  # share of this call's search time a kernel ran on its GPUs (NVML)
    search_window: tuple = ()  # (start, end) wall-clock times (time.time()) of this call's search
    seed_operator: str = ""  # what made the starting kernel: seed, inductor, initialiser
    best_from: str = ""  # the generation-0 kernels the best descends from, e.g. inductor:nd_tiling
    llm: dict | None = None  # uncached LLM calls and their cost
    optuna_url: str = ""  # the run's Optuna storage (one study per tuned individual): optuna-dashboard opens it
    infrastructure_failures: int = 0  # evaluations that ended with no verdict (twice), none of them stored
    tuner: str = ""  # how launch parameters were tuned: the sampler by name (evo.tuner.describe_tuner)
    sizes_check: dict | None = None  # on the interpreter: whether the best runs at other sizes (evo.full_size)
    manifest: dict | None = None  # what the figures were measured on and with (evo.manifest; None: an older run)
    anytime: dict | None = None  # best speed-up so far against GPU-seconds and LLM cost (evo.anytime.curve)
    rewritten_seed: str = ""  # llm.initialise=from_seed: what made the seed the initialiser rewrote into 0.0 ("": none)

    def record(self) -> dict:
        """The run's outcome as one flat record (``summary.json``; one row of a bench)."""
        r, seed = self.best_result, self.tuned_seed_result
        ok = r is not None and r.ok
        check = self.sizes_check or {}
        return {"status": (full_size.BAKED if full_size.baked(check) else "ok") if ok
                else (r.status if r is not None else "no kernel"),
                "problem": r.problem if r is not None else "", "seed": self.rewritten_seed or self.seed_operator,
                "seed_rewritten_by": self.seed_operator if self.rewritten_seed else "",
                "best_from": self.best_from,
                "policy": (r.policy or {}).get("name", "") if r is not None else "",
                "labels": r.labels if r is not None else [],  # what the policy allowed it (uses-torch-compute)
                "best_s": r.time_s if ok else None, "seed_s": None if self.rewritten_seed else _seconds(seed),
                "seed_written_s": _seconds(self.seed_result),
                "start_s": _seconds(seed) if self.rewritten_seed else None,
                **{f"{name}_s": getattr(r, f"{name}_s") if r is not None else None for name in BASELINES},
                **{f"speedup_vs_{name}": getattr(r, f"speedup_vs_{name}") if ok else None for name in BASELINES},
                "speedup_vs_best": r.speedup_vs_best if ok else None, "best_baseline": r.best_baseline if ok else "",
                "baseline_status": r.baseline_status if r is not None else {},
                "sol_fraction": r.sol_fraction if ok else None, "timer": r.timer if r is not None else "",
                "evaluations": self.evaluations, "llm_calls": (self.llm or {}).get("calls", 0),
                "llm_cost_usd": (self.llm or {}).get("cost_usd", 0.0), "search_wall_s": self.search_wall_s,
                "evaluations_per_hour": self.evaluations_per_hour,
                "baseline_wall_s": self.baseline_wall_s, "seed_wall_s": self.seed_wall_s,
                "timeouts": self.timeouts, "gpu_busy": self.gpu_busy, "stop_reason": self.stop_reason,
                "infrastructure_failures": self.infrastructure_failures, "tuner": self.tuner,
                "selection": (INTERPRETER_TIMES if r.timer == "interpreter" else "GPU time") if r is not None else "",
                "baked_seeds": check.get("baked_seeds", []), "other_sizes": check.get("other_sizes") or None,
                "other_sizes_tried": [t["id"] for t in check.get("tried", [])],
                "other_sizes_failed": {t["id"]: f"{t['status']}: {t['reason']}" for t in check.get("tried", [])
                                       if t["status"] != "ok"},
                "manifest": self.manifest,
                "anytime": self.anytime}

    @property
    def evaluations_per_hour(self) -> float | None:
        """The search's rate (None before it ran): evaluator calls over its wall time, across resumes."""
        return self.evaluations / self.search_wall_s * 3600 if self.search_wall_s else None

    def time_text(self) -> str:
        """The search's wall time and rate, with the one-off work before it apart."""
        rate = f", {self.evaluations_per_hour:,.0f} evaluations/hour" if self.search_wall_s else ""
        busy = f", GPU busy {self.gpu_busy:.0%}" if self.gpu_busy is not None else ""
        timeouts = f", {self.timeouts} timed out" if self.timeouts else ""
        return (f"search {self.search_wall_s:.1f} s{rate}{busy}{timeouts}; before it: baselines "
                f"{self.baseline_wall_s:.1f} s, seeds {self.seed_wall_s:.1f} s")

    def evaluations_text(self) -> str:
        """Evaluator calls, distinct kernels, and the evaluations the infrastructure failed (when any)."""
        failed = (f"; {self.infrastructure_failures} infrastructure failures (no verdict, not stored)"
                  if self.infrastructure_failures else "")
        return f"{self.evaluations} ({self.distinct_evaluations} distinct){failed}"

    @property
    def best_result(self) -> EvalResult | None:
        return self.best.result if self.best is not None else None

    @property
    def best_file(self) -> Path:
        return self.run_dir / BEST_KERNEL_FILE

    def table(self) -> str:
        r = self.best_result
        if r is None or not r.ok:
            return "no correct kernel was found"
        if r.timer == "interpreter":  # wall-clock noise of the CPU interpreter: times to compare, never speed-ups
            baked = " at the test sizes only: baked there" if full_size.baked(self.sizes_check) else ""
            rows = [("best kernel", f"correct ({r.trials_passed}/{r.trials} trials){baked}"),
                    (f"best kernel time ({INTERPRETER_TIMES})", format_seconds(r.time_s)),
                    *self.seed_rows(f"{INTERPRETER_TIMES}, "),
                    ("speed-ups", "none on Triton's CPU interpreter (its times say nothing of a GPU's)"),
                    *full_size.rows(self.sizes_check)]
        else:
            rows = [("best kernel time", format_seconds(r.time_s)),
                    *self.seed_rows(),
                    ("speed-up vs seed (as written)", _ratio(self.seed_result, r)),
                    *speedup_rows(r.to_dict()),
                    ("fraction of speed of light", "n/a" if r.sol_fraction is None else f"{r.sol_fraction:.1%}")]
        rows += [*([("labels", labels_text(r.labels))] if r.labels else []),
                 ("best kernel descends from", self.best_from or "?"),
                 ("precision policy", r.policy.get("name", "?")),
                 ("evaluations", self.evaluations_text()),
                 ("stopped because", self.stop_reason), ("time", self.time_text()),
                 ("best kernel file", str(self.best_file)),
                 ("tuning", self.tuner or "?"), ("tuning studies", f"optuna-dashboard {self.optuna_url}"),
                 ("measured with", manifest_line(self.manifest))]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)

    def seed_rows(self, clock: str = "") -> list[tuple[str, str]]:
        """The seed's times as written and tuned; with the seed rewritten by the initialiser, the seed as written
        and the rewrite (the starting kernel) tuned."""
        tuned = (f"starting kernel time ({clock}the {self.seed_operator}'s rewrite of the seed, tuned)"
                 if self.rewritten_seed else f"seed kernel time ({clock}tuned)")
        return [(f"seed kernel time ({clock}as written" + (f", {self.rewritten_seed}" if self.rewritten_seed else "")
                 + ")", _time(self.seed_result)), (tuned, _time(self.tuned_seed_result))]


def _seconds(result: EvalResult | None) -> float | None:
    return result.time_s if result is not None and result.ok else None


def _time(result: EvalResult | None) -> str:
    return format_seconds(result.time_s) if result is not None and result.ok else "n/a"


def _ratio(base: EvalResult | None, best: EvalResult) -> str:
    return f"{base.time_s / best.time_s:.2f}x" if base is not None and base.ok else "n/a"


def summarise(store: RunStore, state: dict) -> RunSummary:
    fastest = state["hall_of_fame"][0] if state.get("hall_of_fame") else None
    check = full_size.verdict(store, fastest)  # on the interpreter, the best may be a slower kernel that runs at
    best = store.individual((check or {}).get("kept") or fastest) if fastest else None  # other sizes too
    seed, rewritten = store.individual("0.0"), store.get_meta(REWRITTEN_SEED) or {}
    seed_as_written = store.evaluation(rewritten.get("key") or evaluation_key(seed.genome.source)) if seed else None
    return RunSummary(store.run_dir, best, seed_as_written, seed.result if seed else None,
                      state.get("stop_reason", ""), store.evaluation_count(), store.distinct_evaluation_count(),
                      state.get("elapsed_s", 0.0), store.get_meta("baseline_wall_s", 0.0),
                      seed_wall_s=store.get_meta("seed_wall_s", 0.0),
                      timeouts=sum(1 for r in store.evaluations().values() if r.status in TIMED_OUT),
                      seed_operator=seed.operator if seed else "", best_from=descends_from(store, best),
                      llm=store.llm_totals(), optuna_url=store.optuna_url,
                      infrastructure_failures=store.infrastructure_failures(),
                      tuner=run_tuner(store.get_meta("config") or {}), sizes_check=check,
                      manifest=store.get_meta("manifest"), anytime=run_curve(store),
                      rewritten_seed=rewritten.get("made_by", ""))


def run_tuner(config: dict) -> str:
    """How a run's config tuned (its sampler by name), or '' for a run saved before samplers were named."""
    tuner = config.get("search", {}).get("tuner", {})
    if tuner.get("sampler") is None:
        return ""
    return describe_tuner(tuner["sampler"], tuner["warm_start"], tuner["trials"], tuner["parallel"])


def descends_from(store: RunStore, individual: Individual | None) -> str:
    """What made the generation-0 ancestors of `individual` (every parent followed), joined by '+': which of the
    seeds (the seed, Inductor's variants, the initialiser's kernel) the kernel came from."""
    roots, todo, seen = set(), [individual] if individual is not None else [], set()
    while todo:
        ind = todo.pop()
        if ind is None or ind.id in seen:
            continue
        seen.add(ind.id)
        if ind.generation == 0:
            roots.add((ind.id, ind.operator))
        todo.extend(store.individual(parent) for parent in ind.parents)
    return "+".join(sorted({operator for _, operator in roots}))


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
    from evo.report import write_report  # the report reads the run back from the store (evo.report imports this)

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
