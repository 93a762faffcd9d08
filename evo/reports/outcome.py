"""A run's outcome, one record: ``RunOutcome``, made from the run store when the run ends (``summarise``), written as
``summary.json`` and read back (``RunOutcome.read``) by the report, the bench, multirun and the experiments; the
console table (``evo.reports.console``) and the report's summary (``evo.reports.report``) are drawn from it.

A field missing from an older run's summary.json reads as its default (none known); a key this version does not
know is refused, naming it.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from evo.reports import sizes_record
from evo.reports.anytime import interpreter_curve, run_curve
from evo.records.checkpoint import Checkpoint
from evo.records.meta import (BASELINE_CACHE, BASELINE_WALL_S, BASELINES_IEEE, CONFIG, MANIFEST, REWRITTEN_SEED,
                              SEED_CACHE, SEED_CAPTURE_S, SEED_CHECK_S, SEED_WALL_S, START_UP, TF32_INCORRECT,
                              VERDICTS_REUSED)
from evo.records.store import RunStore
from evo.evolution.stopping import WALL_TIME
from evo.tuning.tuner import describe_tuner
from fitness.measure.baselines import BASELINES
from kernelevo.core.genome import evaluation_key
from kernelevo.core.individual import INTERPRETER_TIMER, Individual, ranked_by
from kernelevo.core.records import from_record
from kernelevo.core.evaluation_record import TIMED_OUT, EvalResult

BEST_KERNEL_FILE = "best_kernel.py"
SUMMARY_FILE = "summary.json"  # the run's outcome, written when it ends (RunOutcome.write)
INTERPRETER_TIMES = "interpreter wall-clock"  # the label of every time measured on Triton's CPU interpreter
INTERPRETER = INTERPRETER_TIMER  # the timer of Triton's CPU interpreter (kernelevo.core.individual)
OK, NO_KERNEL = "ok", "no kernel"
NO_CORRECT_EXIT = 3  # `kernelevo run`'s exit code when its search ended with no correct kernel (docs/search.md)
NOT_CORRECT_HEADER = ("# kernelevo: NOT A CORRECT KERNEL: no kernel of this run passed the checks; this is its best "
                      "candidate, which failed them ({why}). Do not use it as a kernel.\n")


@dataclass
class RunOutcome:
    """One run's outcome: its best kernel's verdict and figures, its seeds', and what the search spent. Every field
    has a default (nothing known), so the record of a run that failed before its search is ``RunOutcome()``."""
    status: str = ""  # ok, baked-at-test-sizes, the best kernel's failure, or "no kernel"
    reason: str = ""  # why the best kernel (or, with none, the seed) failed
    problem: str = ""
    sizes: dict = field(default_factory=dict)
    device: str = ""
    hardware_profile: str = ""
    timer: str = ""  # cuda-events, interpreter, ...: what every time of the run was measured with
    ranked_by: str = ""  # what the search ranked kernels (parents, tree, best) by: kernelevo.core.individual.ranked_by
    seed: str = ""  # what made the seed: seed, inductor, initialiser (the kernel the initialiser rewrote, if it did)
    seed_rewritten_by: str = ""  # llm.initialise=from_seed: what rewrote the seed into the starting kernel
    best_id: str = ""  # the best kernel's individual (its source: best_file)
    best_from: str = ""  # the generation-0 kernels the best descends from, e.g. inductor:nd_tiling
    best_file: str = ""
    policy: str = ""
    labels: list = field(default_factory=list)  # what the policy allowed the best (uses-torch-compute)
    trials: int | None = None  # the best kernel's correctness trials, and those it passed
    trials_passed: int | None = None
    best_s: float | None = None
    seed_s: float | None = None  # the seed tuned (None when the initialiser rewrote it: then start_s)
    seed_written_s: float | None = None  # the seed as written
    start_s: float | None = None  # the starting kernel (the initialiser's rewrite of the seed) tuned
    eager_s: float | None = None  # each baseline's time (fitness.measure.baselines.BASELINES)
    compile_s: float | None = None
    max_autotune_s: float | None = None
    speedup_vs_eager: float | None = None  # the best kernel's speed-up over each baseline and the fastest
    speedup_vs_compile: float | None = None
    speedup_vs_max_autotune: float | None = None
    speedup_vs_best: float | None = None
    best_baseline: str = ""
    baseline_status: dict = field(default_factory=dict)  # baseline -> ok, failed, compile_timeout, not_measured
    baseline_library: dict = field(default_factory=dict)  # compiled baseline -> its library kernels (unknown: absent)
    # compiled baselines (compile, max_autotune) whose Inductor kernels, judged as seeds, were incorrect with TF32 dot
    # products (the baseline is timed with TF32; the kernel that passed uses IEEE fp32 dots: evo.runs.seeding)
    baselines_tf32_incorrect: list = field(default_factory=list)
    # of those, each one timed again with IEEE fp32 dot products (name -> seconds; absent: not measured, e.g. an
    # older run): the time a Triton kernel the policy admits could be (fitness.measure.baselines.admitted_speedup)
    baselines_ieee_s: dict = field(default_factory=dict)
    # of the reference algorithm's roofline (fitness.problems.speed_of_light): may pass 1
    sol_fraction: float | None = None
    floor_fraction: float | None = None  # of the data floor (absent before issue 41: None)
    evaluations: int | None = None  # evaluator calls, repeats included
    distinct_evaluations: int | None = None
    infrastructure_failures: int = 0  # evaluations that ended with no verdict (twice), none of them stored
    timeouts: int = 0  # evaluations that ran out of time (whole or compiling)
    evaluations_cut: int = 0  # evaluations killed while running at the search's wall-time budget (no verdict)
    llm_calls: int = 0  # uncached LLM calls and their cost
    llm_cost_usd: float = 0.0
    search_wall_s: float | None = None  # the search's wall time, across resumes (baselines and seeds excluded)
    over_budget_s: float | None = None  # search_wall_s past search.wall_time_s, where that stopped it (the cut's tail)
    evaluations_per_hour: float | None = None
    baseline_wall_s: float | None = None  # measuring the baselines, once, before the search
    seed_wall_s: float | None = None  # making generation 0's kernels (torch.compile's capture, an initialiser)
    seed_check_s: float | None = None  # the first seed judged, then the TF32 check: generation 0's, in search_wall_s
    seed_capture_s: float | None = None  # torch.compile's capture from its start, beside the baselines (None: none)
    seed_cache: str = ""  # torch.compile's seeds: "cached", or "captured (why: ...)" ("": not from torch.compile)
    baseline_cache: str = ""  # the baselines: "cached" (an earlier run's, this machine's), "measured"; "": none (CPU)
    verdicts_reused: int = 0  # generation 0's verdicts read from the machine's cache (evo.service.seed_verdicts)
    # seconds from the process's start to the search's by stage: process (interpreter, imports, config), service
    # (workers, the problem and its reference), baselines, seeds, other (None: an older run)
    start_up_s: dict | None = None
    generation0_s: float | None = None  # the search's generation 0: the seeds judged and tuned (None: not recorded)
    search_window: list = field(default_factory=list)  # [start, end] (time.time()) of the last call's search
    gpu_busy: float | None = None  # share of the last call's search time a kernel ran on its GPUs (NVML)
    stop_reason: str = ""
    tuner: str = ""  # how launch parameters were tuned: the sampler by name (evo.tuning.tuner.describe_tuner)
    optuna_url: str = ""  # the run's Optuna storage (one study per tuned individual): optuna-dashboard opens it
    sizes_check: dict | None = None  # off a GPU: whether the best runs at other sizes (evo.reports.sizes_record)
    baked_seeds: list = field(default_factory=list)  # of sizes_check, for tables
    other_sizes: dict | None = None
    other_sizes_tried: list = field(default_factory=list)
    other_sizes_failed: dict = field(default_factory=dict)
    # on a GPU: whether the best kernel is correct at other sizes too (evo.reports.sizes_record; a label, the status
    # stays ok): false where it runs only at the problem's sizes; null where not checked (the note says why; an
    # interpreter run, or one from before issue 43: none)
    runs_at_other_sizes: bool | None = None
    other_sizes_note: str = ""  # that verdict in a line: "no, specialised to the problem's sizes (N=4096); ..."
    # each kernel judged at other sizes (both checks), fastest first: id -> {"verdict": runs-correct, refuses-cleanly or
    # defective (null: no verdict), "sizes": [{"at": "N=12", "verdict", "status", "reason"}, ...]}; the best is never
    # a defective one, save where every kernel tried was (status defective-at-other-sizes)
    other_sizes_verdicts: dict = field(default_factory=dict)
    # what the figures were measured on and with (evo.records.manifest; None: an older run)
    manifest: dict | None = None
    anytime: dict | None = None  # best speed-up so far against GPU-seconds and LLM cost (evo.reports.anytime.curve)
    interpreter_curve: list | None = None  # on the interpreter: correct kernels, best time so far per evaluation

    @property
    def ok(self) -> bool:
        """Whether the run found a correct kernel (baked at the test sizes or not)."""
        return self.status in (OK, sizes_record.BAKED, sizes_record.DEFECTIVE_STATUS)

    @property
    def interpreter(self) -> bool:
        return self.timer == INTERPRETER

    def flagged(self, source: str) -> str:
        """The best kernel's file: its source, under a header saying so when it is not correct."""
        if self.ok:
            return source
        why = f"{self.status}: {self.reason.strip().splitlines()[0]}" if self.reason.strip() else self.status
        return NOT_CORRECT_HEADER.format(why=why if len(why) <= 300 else why[:297] + "...") + source

    def baseline_s(self, name: str) -> float | None:
        return getattr(self, f"{name}_s")

    def speedup(self, against: str) -> float | None:
        """The best kernel's speed-up over a baseline, or over the fastest one (`best`)."""
        return getattr(self, f"speedup_vs_{against}")

    @property
    def seed_speedup(self) -> float | None:
        """The best kernel's speed-up over the seed as written."""
        return self.seed_written_s / self.best_s if self.seed_written_s and self.best_s else None

    @property
    def tuned_seed_s(self) -> float | None:
        """The kernel the search started from, tuned: the seed, or the initialiser's rewrite of it."""
        return self.start_s if self.seed_rewritten_by else self.seed_s

    # JSON -------------------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: dict, where: str = "a run's summary") -> "RunOutcome":
        """The record of `data` (summary.json's fields) by the record rule (``kernelevo.core.records.from_record``: an
        older
        run's lacks some, defaulted; a newer one's fields this version does not know are left out, with a note)."""
        return from_record(cls, data, where)

    @classmethod
    def from_json(cls, text: str, where: str = "a run's summary") -> "RunOutcome":
        return cls.from_dict(json.loads(text), where)

    @classmethod
    def read(cls, run_dir: Path) -> "RunOutcome":
        path = Path(run_dir) / SUMMARY_FILE
        return cls.from_json(path.read_text(), str(path))

    def write(self, run_dir: Path) -> Path:
        path = Path(run_dir) / SUMMARY_FILE
        path.write_text(self.to_json())
        return path


def _seconds(result: EvalResult | None) -> float | None:
    return result.time_s if result is not None and result.ok else None


def outcome_of(best: Individual | None, seed_written: EvalResult | None, tuned_seed: EvalResult | None,
               seed_operator: str, rewritten_seed: str = "", sizes_check: dict | None = None,
               defective_there: bool = False, **spent) -> RunOutcome:
    """The record of a run whose best kernel is `best`, its seed's verdicts as written and tuned, what made the
    seed (and, when the initialiser rewrote it, what made the seed it rewrote), whether every kernel tried at other
    sizes on a GPU was defective there, and `spent`: the record's other fields (evaluations, stop_reason, ...)."""
    r = best.result if best is not None else None
    first = r or tuned_seed  # the problem, device and timer, from the seed when there is no best
    ok = r is not None and r.ok
    check = sizes_check or {}
    found = (sizes_record.DEFECTIVE_STATUS if sizes_record.defective(check) or defective_there else
             sizes_record.BAKED if sizes_record.baked(check) else OK)
    return RunOutcome(
        status=found if ok else (r.status if r is not None else NO_KERNEL),
        reason=first.reason if first is not None and not ok else "", problem=first.problem if first else "",
        sizes=first.sizes if first else {}, device=first.device if first else "",
        hardware_profile=first.hardware_profile if first else "", timer=first.timer if first else "",
        ranked_by=ranked_by(r) if r is not None else "",
        seed=rewritten_seed or seed_operator, seed_rewritten_by=seed_operator if rewritten_seed else "",
        best_id=best.id if best is not None else "", policy=(r.policy or {}).get("name", "") if r else "",
        labels=r.labels if r is not None else [], trials=r.trials if r else None,
        trials_passed=r.trials_passed if r else None, best_s=r.time_s if ok else None,
        seed_s=None if rewritten_seed else _seconds(tuned_seed), seed_written_s=_seconds(seed_written),
        start_s=_seconds(tuned_seed) if rewritten_seed else None,
        **{f"{name}_s": getattr(r, f"{name}_s") if r is not None else None for name in BASELINES},
        **{f"speedup_vs_{name}": getattr(r, f"speedup_vs_{name}") if ok else None for name in (*BASELINES, "best")},
        best_baseline=r.best_baseline if ok else "", baseline_status=r.baseline_status if r is not None else {},
        baseline_library=r.baseline_library if r is not None else {},
        sol_fraction=r.sol_fraction if ok else None, floor_fraction=r.floor_fraction if ok else None,
        sizes_check=sizes_check,
        baked_seeds=check.get("baked_seeds", []), other_sizes=check.get("other_sizes") or None,
        other_sizes_tried=[t["id"] for t in check.get("tried", [])],
        other_sizes_failed={t["id"]: f"{t['status']}: {t['reason']}" for t in check.get("tried", [])
                            if t["status"] != "ok"}, **spent)


def summarise(store: RunStore, checkpoint: Checkpoint | None, stop_reason: str = "",
              gpu_busy: float | None = None, search_window: tuple = ()) -> RunOutcome:
    """The outcome of the run in `store` as of `checkpoint` (its hall of fame and search time)."""
    fastest = checkpoint.hall_of_fame[0] if checkpoint is not None and checkpoint.hall_of_fame else None
    check = sizes_record.check_verdict(store, fastest)  # on the interpreter, the best may be a slower kernel that
    label = sizes_record.label_verdict(store, fastest)  # runs at other sizes too; on a GPU one not defective there
    chosen = sizes_record.chosen(check) or (label or {}).get("chosen")
    best = store.individual(chosen or fastest) if fastest else None
    runs, note = sizes_record.label(label)
    seed, rewritten = store.individual("0.0"), store.get_meta(REWRITTEN_SEED) or {}
    seed_as_written = store.evaluation(rewritten.get("key") or evaluation_key(seed.genome.source)) if seed else None
    search_s = checkpoint.elapsed_s if checkpoint is not None else 0.0
    llm, evaluations = store.llm_totals(), store.evaluation_count()
    return outcome_of(
        best, seed_as_written, seed.result if seed else None, seed.operator if seed else "",
        rewritten.get("made_by", ""), check, best_from=descends_from(store, best),
        runs_at_other_sizes=runs, other_sizes_note=note, defective_there=sizes_record.label_defective(label),
        other_sizes_verdicts={t["id"]: {"verdict": t.get("verdict"), "sizes": t.get("sizes", [])}
                              for t in (check or label or {}).get("tried", [])},
        best_file=str(store.run_dir / BEST_KERNEL_FILE) if best is not None else "",
        evaluations=evaluations, distinct_evaluations=store.distinct_evaluation_count(),
        infrastructure_failures=store.infrastructure_failures(),
        timeouts=sum(1 for r in store.evaluations().values() if r.status in TIMED_OUT),
        evaluations_cut=store.evaluations_cut(),
        llm_calls=llm["calls"], llm_cost_usd=llm["cost_usd"], search_wall_s=search_s,
        over_budget_s=over_budget(store.get_meta(CONFIG) or {}, search_s, stop_reason),
        evaluations_per_hour=evaluations / search_s * 3600 if search_s else None,
        baseline_wall_s=store.get_meta(BASELINE_WALL_S, 0.0), seed_wall_s=store.get_meta(SEED_WALL_S, 0.0),
        seed_check_s=store.get_meta(SEED_CHECK_S), seed_capture_s=store.get_meta(SEED_CAPTURE_S),
        seed_cache=store.get_meta(SEED_CACHE) or "", baseline_cache=store.get_meta(BASELINE_CACHE) or "",
        verdicts_reused=store.get_meta(VERDICTS_REUSED) or 0,
        baselines_tf32_incorrect=store.get_meta(TF32_INCORRECT) or [],
        baselines_ieee_s=store.get_meta(BASELINES_IEEE) or {},
        start_up_s=store.get_meta(START_UP), search_window=list(search_window), gpu_busy=gpu_busy, stop_reason=stop_reason,
        tuner=run_tuner(store.get_meta(CONFIG) or {}), optuna_url=store.optuna_url,
        manifest=store.get_meta(MANIFEST), anytime=run_curve(store),
        interpreter_curve=interpreter_curve(store.evaluation_history()) or None,
        generation0_s=next((row.get("elapsed_s") for row in (checkpoint.logbook if checkpoint else [])
                            if row.get("gen") == 0), None))


def over_budget(config: dict, search_s: float, stop_reason: str) -> float | None:
    """How far the search ran past its wall-time budget (``search.wall_time_s`` of the run's stored `config`, as the
    command line gives it) when that budget stopped it (``evo.evolution.stopping``'s reason): what the deadline's cut
    left running, or the first seed's verdict (``evo.runs.seeding``); else None."""
    budget_s = config.get("search", {}).get("wall_time_s")
    if budget_s is None or not stop_reason.startswith(WALL_TIME):
        return None
    return round(search_s - budget_s, 2)


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
