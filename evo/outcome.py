"""A run's outcome: ``RunSummary``, read back from the run store (``summarise``) by the run when it ends, by the
report, the bench and multirun (``record``: ``summary.json``, one flat record per run), and its console rendering.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evo import full_size
from evo.anytime import run_curve
from evo.manifest import manifest_line
from evo.store import RunStore
from evo.tuner import describe_tuner
from fitness.baselines import BASELINES, speedup_rows
from core.genome import evaluation_key
from core.individual import Individual
from fitness.result import TIMED_OUT, EvalResult, format_seconds, labels_text

BEST_KERNEL_FILE = "best_kernel.py"
SUMMARY_FILE = "summary.json"  # the run's outcome, written when it ends (RunSummary.record)
REWRITTEN_SEED = "rewritten_seed"  # run store meta key: the seed the initialiser rewrote (llm.initialise=from_seed)
INTERPRETER_TIMES = "interpreter wall-clock"  # the label of every time measured on Triton's CPU interpreter


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
