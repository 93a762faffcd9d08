"""What a run prints: a line per generation while it searches, and at its end the table of its outcome
(``evo.reports.outcome.RunOutcome``), whose rows the report's summary shares (``seed_rows``, ``evaluations_text``)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from evo.reports import sizes_record
from evo.records.manifest import manifest_line
from evo.reports.outcome import INTERPRETER_TIMES, RunOutcome
from fitness.measure.baselines import speedup_rows
from fitness.common.formatting import NA, percent, ratio, seconds
from kernelevo.core.evaluation_record import labels_text

if TYPE_CHECKING:
    from evo.evolution.search import GenerationReport

# the two speed-of-light fractions (fitness.problems.speed_of_light): the data floor bounds every kernel; the
# reference's roofline counts its FLOPs, which an exact rewrite may not need (so over 100 % is possible)
ROOFLINE_LABEL = "fraction of the reference algorithm's roofline (over 100 %: fewer FLOPs than the reference)"


def rank_text(value: float, interpreter: bool) -> str:
    """A rank of the search's (``kernelevo.core.individual.ranked_by``) for people: a GPU time, or on the interpreter
    the proxy's
    count of launches."""
    if math.isinf(value):
        return "n/a"
    return f"{value:g} launches" if interpreter else seconds(value)


def print_generation(report: GenerationReport, interpreter: bool = False, tag: str = "") -> None:
    """One line per generation; `tag` names the run among others printing beside it (a sweep's search seed)."""
    best, median = rank_text(report.best_s, interpreter), rank_text(report.median_s, interpreter)
    mark = " *" if report.improved else ""
    label = "ranked by Triton launches: " if interpreter else ""
    who = f"kernelevo {tag}" if tag else "kernelevo"
    print(f"[{who}] gen {report.generation:3d} | evaluations {report.evaluations:4d} | {label}best {best}{mark} | "
          f"median {median} | correct {report.correct}/{report.size} | {report.elapsed_s:.1f} s", flush=True)


def time_text(o: RunOutcome) -> str:
    """The search's wall time and rate, with the one-off work before it apart."""
    rate = f", {o.evaluations_per_hour:,.0f} evaluations/hour" if o.evaluations_per_hour else ""
    busy = f", GPU busy {percent(o.gpu_busy)}" if o.gpu_busy is not None else ""
    timeouts = f", {o.timeouts} timed out" if o.timeouts else ""
    timeouts += f", {o.evaluations_cut} cut running at its budget" if o.evaluations_cut else ""
    timeouts += f", ended {o.over_budget_s:.1f} s past its wall-time budget" if o.over_budget_s else ""
    check = o.seed_check_s or 0.0
    first = f"; first the seed's verdict and any TF32 check, {check:.1f} s" if round(check, 1) else ""
    gen0 = (f", of which generation 0 (the seeds judged and tuned{first}) {o.generation0_s:.1f} s"
            if o.generation0_s is not None else "")
    baselines = ("no baselines (CPU interpreter)" if o.interpreter
                 else f"measuring the baselines {o.baseline_wall_s or 0.0:.1f} s")
    stages = {k: v for k, v in (o.start_up_s or {}).items() if k != "queued" and v is not None}
    queued = (o.start_up_s or {}).get("queued")
    before = (f"; from the process's start to the search's {sum(stages.values()):.1f} s ("
              + ", ".join(f"{name} {seconds:.1f}" for name, seconds in stages.items())
              + (f"; queued behind the GPU's previous search {queued:.1f} s before that" if queued else "")
              + ")") if stages else ""
    cache = f" (seed: {o.seed_cache})" if o.seed_cache else ""
    return (f"search {o.search_wall_s or 0.0:.1f} s{gen0}{rate}{busy}{timeouts}; before it: making the seeds "
            f"{o.seed_wall_s or 0.0:.1f} s{cache}, {baselines}{before}")


def evaluations_text(o: RunOutcome) -> str:
    """Evaluator calls, distinct kernels, and the evaluations the infrastructure failed (when any)."""
    failed = (f"; {o.infrastructure_failures} infrastructure failures (no verdict, not stored)"
              if o.infrastructure_failures else "")
    return f"{o.evaluations} ({o.distinct_evaluations} distinct){failed}"


def seed_rows(o: RunOutcome, clock: str = "") -> list[tuple[str, str]]:
    """The seed's times as written and tuned; with the seed rewritten by the initialiser, the seed as written
    and the rewrite (the starting kernel) tuned."""
    tuned = (f"starting kernel time ({clock}the {o.seed_rewritten_by}'s rewrite of the seed, tuned)"
             if o.seed_rewritten_by else f"seed kernel time ({clock}tuned)")
    written = f"seed kernel time ({clock}as written" + (f", {o.seed}" if o.seed_rewritten_by else "") + ")"
    return [(written, seconds(o.seed_written_s)), (tuned, seconds(o.tuned_seed_s))]


def table(o: RunOutcome) -> str:
    """The run's outcome as the run prints it at its end."""
    if not o.ok:
        return "no correct kernel was found"
    if o.interpreter:  # wall-clock noise of the CPU interpreter: times to compare, never speed-ups
        baked = " at the test sizes only: baked there" if sizes_record.baked(o.sizes_check) else ""
        rows = [("best kernel", f"correct ({o.trials_passed}/{o.trials} trials){baked}"),
                (f"best kernel time ({INTERPRETER_TIMES})", seconds(o.best_s)),
                *seed_rows(o, f"{INTERPRETER_TIMES}, "),
                ("speed-ups", "none on Triton's CPU interpreter (its times say nothing of a GPU's)"),
                *sizes_record.rows(o.sizes_check)]
    else:
        rows = [("best kernel time", seconds(o.best_s)), *seed_rows(o),
                ("speed-up vs seed (as written)", ratio(o.seed_written_s, o.best_s)),
                *speedup_rows(vars(o)),
                ("fraction of the data floor", percent(o.floor_fraction, 1, NA)),
                (ROOFLINE_LABEL, percent(o.sol_fraction, 1, NA)),
                *sizes_record.label_rows(o.runs_at_other_sizes, o.other_sizes_note, o.interpreter)]
    rows += [*([("labels", labels_text(o.labels))] if o.labels else []),
             ("ranked by", o.ranked_by or "?"),
             ("best kernel descends from", o.best_from or "?"),
             ("precision policy", o.policy or "?"),
             ("evaluations", evaluations_text(o)),
             ("stopped because", o.stop_reason), ("time", time_text(o)),
             ("best kernel file", o.best_file),
             ("tuning", o.tuner or "?"), ("tuning studies", f"optuna-dashboard {o.optuna_url}"),
             ("measured with", manifest_line(o.manifest))]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def start_line(evaluator, evaluations: int, children: int, run_dir, scale: int = 1) -> str:
    """What the run runs on and how much at once (`scale`: the supply's factor, its evaluators), and where it is
    stored."""
    memory = f" ({evaluator.memory_slots} at a time in the problem's GPU memory)" if evaluator.memory_slots else ""
    scaled = f" ({scale} x search.lambda_ a generation: one per evaluator)" if scale > 1 else ""
    return (f"{evaluator.describe()}; {evaluations} evaluations{memory} and {children} children in "
            f"flight{scaled}; run dir {run_dir}")
