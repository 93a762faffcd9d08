"""Does the run's best kernel run at other sizes: the check, judged at the end of a run, in one place for both forms.

* **Off a GPU** (``SizesCheck``): on Triton's CPU interpreter a run judges its candidates at small test sizes
  (``fitness.problems.sizes``) and chooses among children by the interpreter's wall-clock time (no GPU timing). A
  kernel that reads its sizes from its inputs runs at any size; a kernel converted from torch.compile's capture at the
  test sizes (``kernelevo.seeds.inductor``) holds those sizes as literals, and so do its descendants by offline
  operators, which change launch constants only: it is baked at the test sizes and cannot run at the full sizes the
  target GPU would see -- unless it was captured with dynamic shapes and Dynamo kept no size a literal (its docstring
  says so: ``kernelevo.seeds.inductor.sizes.size_generic``). So, when the test sizes are not the full sizes, the end of
  an interpreter run judges the fastest distinct correct kernels again for correctness (``TRIES`` at most, fastest
  first, as many at once as the run evaluates, until one passes). The run's best is the fastest that runs correctly
  there too; when none does, the fastest that refuses them cleanly, flagged (baked); a defective kernel never, save
  where every kernel tried is.
* **On a GPU** (``SizesLabel``): a GPU run judges its candidates at the problem's own sizes, and torch.compile's seeds
  are captured there with static shapes (each seed's forward guarding them: ``kernelevo.seeds.inductor.input_guard``),
  so the best kernel may run only at those sizes (shape over-fitting). After the search the fastest distinct correct
  kernels, fastest first, are judged for correctness only, one at a time, until one is not defective there: it runs
  correctly at every other size, or refuses them cleanly. That one is the run's best; where every kernel tried is
  defective, the fastest stays the best, flagged.

Either way a kernel is judged (``judge_at_sizes``) by evaluators of the problem at other sizes that differ from the
run's in every size constant (``size_sets``: about 3/4, and odd below that), for correctness only
(``Evaluator.correctness``: its trials and guards, no timing, no baseline), each kernel at each size a worker job of its
own in the run's sandbox (a kernel that faults costs that process only), and gets a verdict per size
(``size_verdict``): runs-correct, refuses-cleanly (forward's ValueError: a converted seed's guard) or defective
(anything else wrong).

``plan`` (before the search) and ``judge`` (after it) are what ``evo.runs.run.execute`` calls; the verdict is a
record in the run store's meta (``SIZES_CHECK``, ``SIZES_LABEL``), which the reports read back and say
(``evo.reports.sizes_record``): they judge nothing.
"""
from __future__ import annotations

import contextlib
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from kernelevo.core.evaluation_record import NO_VERDICT
from kernelevo.core.individual import Individual
from evo.records.checkpoint import Checkpoint
from evo.records.meta import SIZES_CHECK, SIZES_LABEL
from evo.records.store import RunStore
from evo.reports.sizes_record import DEFECTIVE, LABEL, REFUSES, RUNS, label, sizes_text, verdict_text
from fitness.evaluation.evaluator import Evaluator
from fitness.evaluation.from_config import fitness_parts
from fitness.evaluation.plan import JudgePlan
from fitness.problems.problem import INDUCTOR, ProblemSpec, load_problem
from fitness.problems.sizes import OtherSizes, other_sizes
from fitness.workers.sandbox import Sandbox
from kernelevo.core.individual import LAUNCHES
from kernelevo.seeds.inductor.sizes import size_generic

log = logging.getLogger(f"kernelevo.{__name__}")

TRIES = 4  # distinct kernels judged again at the other sizes, fastest first (the batch where one passes ends it)
TRIAL = re.compile(r"^trial \d+ \(input seed \d+\): ")  # how the judge's reasons start (fitness/judge/trials.py)
# how the judge's reason starts where forward refused the inputs (kernelevo.seeds.inductor.input_guard)
REFUSAL = "ValueError: "


def compiler_seeds(made_by: list[str]) -> list[str]:
    """Which of generation 0's makers are torch.compile's captures (``inductor``, ``inductor:<variant>``)."""
    return [m for m in made_by if m == INDUCTOR or m.startswith(f"{INDUCTOR}:")]


def baked_and_generic(seeds: list) -> tuple[list[str], list[str]]:
    """Generation 0's compiler seeds (``evo.runs.seeding.Seed``: made_by, genome), split: those with the sizes they were
    captured at baked in, and those that read their sizes from their inputs (``size_generic``)."""
    compiler = set(compiler_seeds([s.made_by for s in seeds]))
    generic = [s.made_by for s in seeds if s.made_by in compiler and size_generic(s.genome.source)]
    return [s.made_by for s in seeds if s.made_by in compiler and s.made_by not in generic], generic


@dataclass
class SizesCheck:
    """What an interpreter run knows before its search: the sizes judged, the full sizes, the other sizes."""
    judge_plan: JudgePlan  # the run's: the separate evaluator is built from its parts
    test_sizes: dict  # the size constants judged at that differ from the full sizes ({}: the full sizes are judged)
    full_sizes: dict  # the same constants at the full sizes
    other: ProblemSpec | None  # the problem at the other sizes (None: no check)
    other_sizes: dict  # the changed constants' values there
    baked_seeds: list  # generation 0's compiler seeds, captured at the test sizes and baked there
    why_not: str = ""  # why there is no check
    generic_seeds: list = field(default_factory=list)  # generation 0's compiler seeds that read their sizes
    sets: list = field(default_factory=list)  # (changed constants, problem) of each other size, the first: `other`

    @classmethod
    def plan(cls, judge: JudgePlan, evaluator, seeds: list) -> "SizesCheck":
        """The check for a run judged by `evaluator` (on the interpreter) whose generation 0 is `seeds`."""
        target, spec = evaluator.target, evaluator.problem
        judged = {k: v for k, v in target.evaluated_sizes.items() if target.sizes.get(k) != v}
        full = {k: target.sizes.get(k) for k in judged}
        if not judged:
            return cls(judge, {}, {}, None, {}, [], "the test sizes are the problem's full sizes")
        sets, why_not = size_sets(spec, load_problem(spec), "the check of kernels baked at the test sizes")
        baked, generic = baked_and_generic(seeds)
        return cls(judge, judged, full, sets[0][1] if sets else None, sets[0][0] if sets else {}, baked, why_not,
                   generic, sets)

    def start_line(self) -> str:
        """The run's one line on how it chooses, at its start."""
        line = f"kernels ranked by {LAUNCHES}"
        if not self.test_sizes:
            return f"{line}, at the problem's full sizes (its test sizes): every kernel judged here runs at them"
        line += f", at the test sizes {sizes_text(self.test_sizes)}, not the full sizes {sizes_text(self.full_sizes)}"
        if self.baked_seeds:
            line += (f"; generation 0's compiler seeds ({', '.join(self.baked_seeds)}) were captured at the test "
                     f"sizes: they and their offline descendants are baked at those sizes and cannot run at the full "
                     f"sizes")
        if self.generic_seeds:
            line += (f"; generation 0's compiler seeds ({', '.join(self.generic_seeds)}) were captured with dynamic "
                     f"shapes: they read their sizes from their inputs")
        if self.other is None:
            return f"{line}; no other sizes to check kernels at ({self.why_not})"
        return (f"{line}; at the end the fastest correct kernels are judged again at other sizes "
                f"({'; '.join(sizes_text(changed) for changed, _ in self.sets)}) and the best is the fastest correct "
                f"there too (never one that is defective there)")

    def judge(self, store: RunStore, checkpoint: Checkpoint | None, parallel: int = 1,
              sandbox: Sandbox | None = None) -> dict:
        """Judge the fastest distinct kernels at each other size, `parallel` at a time, until one runs correctly at
        all of them (``judge_at_sizes``); the best is that one, else the fastest that refuses them cleanly (baked),
        never a defective one; store and print the verdict, and return it. `sandbox`: the run's evaluator's, still open,
        whose fork server then serves this check too (None: a sandbox of its own)."""
        fastest = checkpoint.hall_of_fame[0] if checkpoint is not None and checkpoint.hall_of_fame else None
        record = {"fastest": fastest, "test_sizes": self.test_sizes, "full_sizes": self.full_sizes,
                  "other_sizes": self.other_sizes, "size_sets": [changed for changed, _ in self.sets],
                  "baked_seeds": self.baked_seeds, "generic_seeds": self.generic_seeds, "tried": [], "kept": None,
                  "chosen": None, "why_not": self.why_not}
        tries = candidates(store, fastest) if self.other is not None else []
        if tries:
            record["tried"] = judge_at_sizes(tries, self.sets, self.judge_plan, sandbox, parallel,
                                             lambda t: t["verdict"] == RUNS)
            record["kept"] = next((t["id"] for t in record["tried"] if t["verdict"] == RUNS), None)
            record["chosen"] = record["kept"] or next((t["id"] for t in record["tried"] if t["verdict"] == REFUSES),
                                                      None)
        store.set_meta(SIZES_CHECK, record)
        if self.other is not None:
            log.info(f"{verdict_text(record)}")
        return record


@dataclass
class SizesLabel:
    """What a GPU run knows before its search: its judge and the problem at the other sizes."""
    judge_plan: JudgePlan  # the run's: the check's evaluator is built from its parts
    problem_sizes: dict  # the changed size constants at the problem's sizes
    other_sizes: dict  # the same constants at the other sizes
    other: ProblemSpec | None  # the problem at the other sizes (None: no check)
    why_not: str = ""  # why there is no check
    sets: list = field(default_factory=list)  # (changed constants, problem) of each other size, the first: `other`

    @classmethod
    def plan(cls, judge: JudgePlan, evaluator) -> "SizesLabel":
        """The check of the best kernel of a run planned by `judge` and judged by `evaluator` (at its problem's
        sizes)."""
        spec = evaluator.problem
        loaded = load_problem(spec)
        sets, why_not = size_sets(spec, loaded, "the check of the best kernel")
        if not sets:
            return cls(judge, {}, {}, None, why_not)
        changed = {k for moved, _ in sets for k in moved}
        return cls(judge, {k: loaded.sizes.get(k) for k in sorted(changed)}, dict(sets[0][0]), sets[0][1], "", sets)

    def judge(self, store: RunStore, checkpoint: Checkpoint | None, sandbox: Sandbox | None = None) -> dict:
        """Judge the fastest distinct correct kernels for correctness at the other sizes (untimed), one at a time,
        until one is not defective there; store and log the verdict, and return it. `sandbox`: the run's
        evaluator's, still open (None: a sandbox of its own)."""
        best = checkpoint.hall_of_fame[0] if checkpoint is not None and checkpoint.hall_of_fame else None
        record = {"best": best, "problem_sizes": self.problem_sizes, "other_sizes": self.other_sizes,
                  "size_sets": [changed for changed, _ in self.sets], "tried": [], "chosen": None, "runs": None,
                  "status": "", "reason": "", "why_not": self.why_not}
        individual = store.individual(best) if best is not None else None
        if self.other is not None and (individual is None or not individual.ok):
            record["why_not"] = "no correct kernel to judge"
        elif self.other is not None:
            try:
                record["tried"] = judge_at_sizes(candidates(store, best), self.sets, self.judge_plan, sandbox, 1,
                                                 lambda t: t["verdict"] in (RUNS, REFUSES))
            except Exception as exc:  # noqa: BLE001 - whatever fails (the problem at the other sizes, a
                # ProblemError; the check's own evaluator), the run's figures and its summary stand
                record["why_not"] = (f"the problem cannot be judged at {sizes_text(self.other_sizes)}: "
                                     f"{type(exc).__name__}: {exc}")[:400]
            record.update(settled(record["tried"]))
        store.set_meta(SIZES_LABEL, record)
        log.info(f"{LABEL}: {label(record)[1]}")
        return record


def settled(tried: list[dict]) -> dict:
    """The record's verdict from the kernels `tried` (fastest first): the first not defective is chosen; whether it
    runs at the other sizes (None: no kernel has a verdict), and the status and reason of the chosen one (of the
    fastest where every kernel is defective)."""
    judged = [t for t in tried if t["verdict"] is not None]
    pick = next((t for t in judged if t["verdict"] in (RUNS, REFUSES)), judged[0] if judged else None)
    if pick is None:
        return {"why_not": f"no verdict at the other sizes: {tried[0]['reason']}"} if tried else {}
    return {"chosen": pick["id"] if pick["verdict"] != DEFECTIVE else None, "runs": pick["verdict"] == RUNS,
            "status": pick["status"], "reason": pick["reason"]}


def size_sets(spec: ProblemSpec, loaded, purpose: str) -> tuple[list[tuple[dict, ProblemSpec]], str]:
    """The other sizes a kernel is judged at (``fitness.problems.sizes.other_sizes``): about three quarters of each
    size constant, and odd ones below those (no block size of a power of two divides them), where they differ;
    each as (the changed constants, the problem there), and why there are none."""
    found: list[OtherSizes] = []
    for odd in (False, True):
        other = other_sizes(loaded, odd=odd)
        if not other.why_not and all(other.changed != seen.changed for seen in found):
            found.append(other)
    why_not = "" if found else other.why_not
    return [(o.changed, replace(spec, sizes=o.sizes, size_note=f"other sizes for {purpose}: {o.describe()}"))
            for o in found], why_not


def size_verdict(result) -> str | None:
    """A kernel's verdict at one other size: runs-correct, refuses-cleanly (forward's ValueError, the guard's:
    ``kernelevo.seeds.inductor.input_guard``), defective (wrong values, a wrong shape, a CUDA error, a crash, any other
    failure), or None (no verdict: the judge's own failure, or cancelled)."""
    if result.status in NO_VERDICT:
        return None
    if result.ok:
        return RUNS
    return REFUSES if result.status == "runtime_error" and first_line(result).startswith(REFUSAL) else DEFECTIVE


def kernel_verdict(verdicts: list[str | None]) -> str | None:
    """A kernel's verdict over the other sizes: defective at any, else None where one has none, else runs-correct
    at all, else refuses-cleanly."""
    if DEFECTIVE in verdicts:
        return DEFECTIVE
    if None in verdicts:
        return None
    return RUNS if all(v == RUNS for v in verdicts) else REFUSES


def judge_at_sizes(tries: list[Individual], sets: list, judge: JudgePlan, sandbox: Sandbox | None, parallel: int,
           enough: Callable[[dict], bool]) -> list[dict]:
    """`tries` (fastest first) judged for correctness at each of `sets` (``size_sets``), each kernel at each size a
    worker job of its own (a kernel that faults costs that process only), `parallel` kernels at a time, until a
    batch holds one that `enough` accepts: per kernel its id, its verdict, its first failure's status and reason,
    and its verdict at each size."""
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(parallel) as pool:
        evaluators = [stack.enter_context(evaluator_at(spec, judge, sandbox, parallel)) for _, spec in sets]

        def one(ind: Individual) -> dict:
            source = ind.genome.rendered()
            results = [evaluator.correctness(source, label=f"other sizes: {ind.id}") for evaluator in evaluators]
            sizes = [{"at": sizes_text(changed), "verdict": size_verdict(r), "status": r.status,
                      "reason": first_line(r)} for (changed, _), r in zip(sets, results)]
            failed = next((s for s in sizes if s["status"] != "ok"), {"status": "ok", "reason": ""})
            return {"id": ind.id, "verdict": kernel_verdict([s["verdict"] for s in sizes]),
                    "status": failed["status"], "reason": failed["reason"], "sizes": sizes}

        tried: list[dict] = []
        for start in range(0, len(tries), parallel):
            batch = list(pool.map(one, tries[start:start + parallel]))
            tried += batch
            if any(enough(t) for t in batch):
                break
    return tried


def evaluator_at(spec: ProblemSpec, judge: JudgePlan, sandbox: Sandbox | None,
                 parallel: int | None = None) -> Evaluator:
    """An evaluator of the problem at other sizes (`spec`), judging as the run's plan `judge` says, in the run's
    `sandbox` (None: one of its own), with spare workers for `parallel` evaluations at once (None: the settings')."""
    parts = fitness_parts(judge)
    settings = parts.settings if parallel is None else replace(parts.settings,
                                                               spares=parts.settings.warm_spares(parallel))
    device = sandbox.device if sandbox is not None else parts.device
    return Evaluator(spec, parts.policy, parts.profile, settings, device=device, sandbox=sandbox)


def first_line(result) -> str:
    """A failure's reason, in a line: its first, without the trial and input seed it names."""
    lines = result.reason.strip().splitlines()
    return TRIAL.sub("", lines[0])[:200] if lines else ""


def candidates(store: RunStore, fastest: str | None, limit: int = TRIES) -> list[Individual]:
    """The correct individuals, one per distinct kernel (evaluated source: its launch parameters count, since one
    may be what bakes a size in), best first by the search's ranking (``kernelevo.core.individual.ranked_by``; the hall
    of fame's first before any other of equal rank), at most `limit`."""
    correct = sorted((ind for ind in store.individuals() if ind.ok), key=lambda ind: (ind.rank, ind.id != fastest))
    by_kernel: dict[str, Individual] = {}
    for ind in correct:
        by_kernel.setdefault(ind.key, ind)
    return list(by_kernel.values())[:limit]
