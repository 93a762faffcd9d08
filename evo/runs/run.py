"""A run, wired from its plan (``evo.plan.RunPlan``, made once per command from the composed config): run store ->
evaluation pool -> tuner -> operators -> seeds -> search -> outcome.

``execute`` runs the search stored in a run directory: a new run, or (with the plan of the config the store kept,
its budgets changed as asked: ``kernelevo.resuming``) a resumed one. The
seeds are made by ``evo.runs.seeding``; what the run prints, by ``evo.reports.console``; the outcome it ends with
(``RunOutcome``, ``summary.json``), by ``evo.reports.outcome``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

from evo.reports import sizes_record
from evo.runs.other_sizes import SizesCheck, SizesLabel
from evo.service.evaluation import EvaluationService, evaluations_in_flight
from evo.reports.console import print_generation, start_line, table
from evo.records.manifest import run_manifest
from evo.reports.outcome import INTERPRETER_TIMES, RunOutcome, summarise
from evo.plan import RunPlan
from evo.runs.progress import Progress
from evo.reports.report_html import write_report
from evo.evolution.search import Search, SearchSettings
from evo.runs.seeding import keep_verdicts, make_seeds, reuse_verdicts, start_capture
from evo.runs.start_gate import wait_for_gate
from evo.records.meta import (BASELINE_CACHE, BASELINE_JOBS, BASELINE_WALL_S, BASELINES_IEEE, CONFIG, MANIFEST,
                              SEED_CHECK_S, SEED_WALL_S, START_UP, START_UP_UNDER_LOCK, SUPPLY_EVALUATORS,
                              TF32_INCORRECT)
from evo.records.store import RunStore
from evo.settings import TunerSettings
from evo.tuning.tuner import Tuner
from kernelevo.core.resources import process_started
from fitness.evaluation.evaluator import Evaluator, start_up_under_lock
from fitness.evaluation.from_config import check_fitness_config
from fitness.measure.baselines import PRECISION_NOTE, jobs_text
from operators.base import CURRENT_CHILD

log = logging.getLogger(f"kernelevo.{__name__}")

def build_team(plan: RunPlan, store: RunStore, evaluator: Evaluator):
    """The LLM agents of the plan's `llm` part, or None for an offline run (litellm is imported only here)."""
    if plan.llm is None:
        return None
    from operators.llm.client import LLMClient
    from operators.llm.context import ContextBuilder
    from operators.llm.team import LLMTeam

    llm, spent = plan.llm, store.llm_totals()  # a resumed run counts what it already spent
    max_calls, max_cost = llm.budget.max_calls, llm.budget.max_cost_usd
    client = LLMClient(llm.client, recorder=lambda call: _record_llm_call(store, call),
                       max_calls=None if max_calls is None else max_calls - spent["calls"],
                       max_cost_usd=None if max_cost is None else max_cost - spent["cost_usd"])
    from operators.llm.figures import judged_inputs

    context = ContextBuilder(llm.context, evaluator.target, Path(evaluator.problem.path).read_text(),
                             judged_inputs(evaluator.problem, evaluator.target.dependence))
    return LLMTeam(client, context, llm.team, evaluator.policy.to_dict(),
                   on_prompt=lambda role, chars, parts: _record_prompt(store, role, chars, parts),
                   tuner_trials=plan.tuner.trials)


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
    when an earlier run measured them (``fitness.measure.baseline_cache``)."""
    evaluator = service.evaluators[0]
    if evaluator.on_gpu and store.get_meta(BASELINE_WALL_S) is None:
        start = time.perf_counter()
        baseline = evaluator.baseline()
        store.set_meta(BASELINE_WALL_S, time.perf_counter() - start)
        store.set_meta(BASELINE_CACHE, "cached" if baseline.cached else "measured")
        how = f"read from {baseline.cached}" if baseline.cached else "measured"
        log.info(f"baselines {how} in {time.perf_counter() - start:.1f} s: "
                 + ", ".join(f"{name} {state}" for name, state in baseline.status.items())
                 + (f" ({jobs_text(baseline.jobs)})" if baseline.jobs else ""))
        if baseline.jobs:
            store.set_meta(BASELINE_JOBS, baseline.jobs)


def measure_ieee_baselines(service: EvaluationService, store: RunStore) -> None:
    """After the search (outside its time), once per run: the compiled baselines whose own kernels were incorrect
    with TF32 dot products (``evo.runs.seeding``; timed with TF32, as the policy allows) timed again with IEEE fp32
    dots, kept in the store (``BASELINES_IEEE``). A Triton kernel the policy admits could be that, not the TF32 one
    (``fitness.measure.baselines.triton_best``), and a speed-up against a baseline the policy refuses says little
    (docs/measurements.md)."""
    names = store.get_meta(TF32_INCORRECT) or []
    if not names or store.get_meta(BASELINES_IEEE) is not None:
        return
    start = time.perf_counter()
    baseline = service.evaluators[0].baseline_ieee(names)
    if baseline is None:  # off a GPU, or a policy without TF32: the baselines were IEEE already
        return
    times = {name: stats.median_s for name in names if (stats := baseline.stats(name)) is not None}
    store.set_meta(BASELINES_IEEE, times)
    how = f"read from {baseline.cached}" if baseline.cached else f"measured in {time.perf_counter() - start:.1f} s"
    log.info(f"with IEEE fp32 dot products ({how}), as their TF32 kernels fail the policy: "
             + ", ".join(f"{name} {times[name] * 1e3:.4g} ms" if name in times else
                         f"{name} {baseline.status.get(name, 'not measured')}" for name in names)
             + "".join(f"; {note}" for note in baseline.notes if not note.startswith(PRECISION_NOTE))[:600])


def calls_in_flight_line(concurrency: int, children: int) -> str:
    """The start line on LLM calls in flight: one per child at most, `llm.concurrency` at most; a child whose call
    waits holds up no evaluation of the others (``evo.evolution.search``)."""
    calls = min(concurrency, children)
    why = (f"llm.concurrency={concurrency}" if concurrency <= children else
           f"one per child of the {children} in flight, fewer than llm.concurrency={concurrency}")
    return f"at most {calls} LLM calls in flight ({why}); evaluations go on while calls wait"


def within_llm_budget(settings: SearchSettings, operators: list, plan: RunPlan) -> SearchSettings:
    """Fewer children in flight where the LLM call budget cannot carry them all, each reserving its calls (plan,
    code, debugger's tries: ``operators.llm.operators.children_in_flight``); each then sees every child before those
    in flight (staleness no larger), so a small budget buys depth, not more plans."""
    from operators.llm.operators import children_in_flight

    cap = children_in_flight(operators, plan.llm.budget.max_calls) if plan.llm is not None else None
    if cap is None or cap >= settings.children_in_flight:
        return settings
    return replace(settings, parallel=cap, staleness=min(settings.window, cap))


@dataclass(frozen=True)
class CheckedRun:
    """A run's plan as ``check_run_config`` checked it, handed to ``execute``: the search's settings the run can
    carry (``within_llm_budget``; the plan's plug-ins are the plan's)."""
    settings: SearchSettings


def check_run_config(plan: RunPlan) -> CheckedRun:
    """Everything about a run's plan that can be checked before anything is written or started (the command line
    runs it before Hydra makes the run directory, once per command; the settings' own checks ran when the plan was
    made, its plug-ins' when they were: ``kernelevo.plans``). Raises KernelevoError."""
    operators = list(plan.operators)
    settings = within_llm_budget(plan.search, operators, plan)
    plan.strategy.check(settings), plan.strategy.usable(operators)
    evaluations_in_flight(plan.parallel)
    check_fitness_config(plan.judge)
    from operators.llm.check import uses_llm  # LLM operators need an `llm=` (no litellm imported here)

    uses_llm(operators, plan.llm)
    return CheckedRun(settings)


def execute(plan: RunPlan, run_dir: Path, checked: CheckedRun, tag: str = "") -> RunOutcome:
    """Run or resume the search stored in run_dir (its plan `plan`, as `check_run_config` found it: `checked`),
    print progress and the outcome, write the best kernel, the outcome (summary.json) and the report. `tag`: what
    names this run in its progress lines (a sweep's seed)."""
    settings, operators = checked.settings, list(plan.operators)
    queued = wait_for_gate()  # a bench's prestarted search: until the GPU is free
    # where the time before the search goes
    marks = {"process": process_started(), "queued": queued, "run": time.time()}
    store = RunStore(run_dir)
    store.set_meta(CONFIG, plan.config)
    service, tuner, completed = plan.backend.service(plan, store), None, False
    marks["service"] = time.time()
    try:
        settings = supplied(settings, store, len(service.evaluators))
        tuner = supplied_tuner(service, store.optuna_url, settings, plan.tuner, plan.search.seed, store)
        evaluator = service.evaluators[0]
        store.set_meta(START_UP_UNDER_LOCK, start_up_under_lock(plan.judge.settings, service.profile))
        log.info(start_line(evaluator, service.parallel, settings.children_in_flight, run_dir, settings.scale))
        from operators.llm.operators import calls_per_child

        if settings.children_in_flight < plan.search.children_in_flight:
            log.info(f"llm.budget.max_calls={plan.llm.budget.max_calls} carries "
                     f"{settings.children_in_flight} children in flight (of {plan.search.children_in_flight}), each "
                     f"reserving its {calls_per_child(operators)} calls (plan, code, debugger's tries)")
        if plan.llm is not None and calls_per_child(operators):
            log.info(calls_in_flight_line(plan.llm.client.concurrency, settings.children_in_flight))
        team = build_team(plan, store, evaluator)
        capture = start_capture(plan, team, service, run_dir)  # beside the baselines: both mostly compile
        measure_baselines(service, store)
        verdicts = reuse_verdicts(service, store)  # generation 0's verdicts of earlier runs: not judged again
        seeds = make_seeds(plan, team, service, run_dir, capture)
        sizes_check = SizesCheck.plan(plan.judge, evaluator, seeds) if not evaluator.on_gpu else None
        size_label = SizesLabel.plan(plan.judge, evaluator) if evaluator.on_gpu else None
        shown = partial(print_generation, interpreter=not evaluator.on_gpu, tag=tag)

        def on_generation(report) -> None:
            shown(report)
            if report.generation == 0:  # before any child: the store holds generation 0's verdicts only
                keep_verdicts(verdicts, store)

        search = Search(seeds, operators, tuner, store, settings, on_generation,
                        selection=plan.selection, team=team, strategy=plan.strategy,
                        spent_s=store.get_meta(SEED_CHECK_S) or 0.0)
        marks["search"] = time.time()
        stop_reason, window, busy = run_search(search, service, store, settings, sizes_check)
        if store.get_meta(START_UP) is None:  # a resume keeps the first start's
            store.set_meta(START_UP, start_up(marks, store))
        store.set_meta(MANIFEST, run_manifest(plan, evaluator))
        if sizes_check is not None:  # the best must run at other sizes than the test sizes, in the run's sandbox
            sizes_check.judge(store, store.latest_checkpoint(), service.parallel, evaluator.sandbox)
        if size_label is not None:  # on a GPU: the fastest kernels not defective at other sizes; correctness only
            size_label.judge(store, store.latest_checkpoint(), evaluator.sandbox)
        measure_ieee_baselines(service, store)
        completed = True
    finally:
        if tuner is not None:
            tuner.close()
        service.close(completed)  # a completed run's fork servers serve the process's next run (fitness.workers.pool)
    outcome = conclude(store, stop_reason, busy, window)
    print(table(outcome), flush=True)
    print(f"  report: {write_report(run_dir)}", flush=True)
    return outcome


def start_up(marks: dict, store: RunStore) -> dict:
    """Seconds from the process's start to the search's, by stage (``RunOutcome.start_up_s``): the interpreter, its
    imports and the config; the evaluation service (workers started, the problem loaded and its reference run); the
    baselines and the seeds (as stored: read from caches when warm; torch.compile's capture runs beside the
    baselines, so the seeds count only where it ran on after them; the compiler seeds' judging, generation 0's
    first evaluations, counts in the search's time, not here); and the rest (the team, the search built);
    `queued`, for a bench's prestarted search, the wait at its gate (``evo.runs.start_gate``) after the process's
    start."""
    stages = {"process": marks["run"] - marks["process"] - marks["queued"] if marks["process"] else None,
              "service": marks["service"] - marks["run"],
              "baselines": store.get_meta(BASELINE_WALL_S, 0.0), "seeds": store.get_meta(SEED_WALL_S, 0.0)}
    stages["other"] = (marks["search"] - marks["service"] - stages["baselines"] - stages["seeds"]
                       - store.get_meta(SEED_CHECK_S, 0.0))  # the seeds judged: in the search's time
    if marks["queued"]:
        stages["queued"] = marks["queued"]  # not in the run's time: the bench's row counts from the gate
    return {name: None if seconds is None else round(seconds, 2) for name, seconds in stages.items()}


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


def supplied_tuner(service: EvaluationService, storage_url: str | None, settings: SearchSettings,
                   tuning: TunerSettings, seed: int, store: RunStore) -> Tuner:
    """The run's tuner (``search.tuner``: `tuning`) with the search's supply on its evaluators (`settings`, as
    ``supplied`` made them): each of generation 0's seeds tuned ``SearchSettings.seed_trials`` trials,
    ``seed_batch`` at once."""
    return Tuner(service, storage_url, seed=seed, store=store, **asdict(tuning),
                 seed_trials=settings.seed_trials(tuning.trials),
                 seed_parallel=settings.seed_batch(tuning.parallel, tuning.trials))


def run_search(search: Search, service: EvaluationService, store: RunStore, settings: SearchSettings,
               sizes_check: SizesCheck | None) -> tuple[str, tuple, float | None]:
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
        best = sizes_record.label_flagged(best, outcome.runs_at_other_sizes, outcome.other_sizes_note,
                                          outcome.status == sizes_record.DEFECTIVE_STATUS and not outcome.interpreter)
        Path(outcome.best_file).write_text(outcome.flagged(sizes_record.flagged(best, outcome.sizes_check)))
    outcome.write(store.run_dir)
    store.close()
    return outcome
