"""Without a GPU, which kernels run at the problem's full sizes: the run's best is one that does, measured.

On Triton's CPU interpreter a run judges its candidates at small test sizes (``fitness.problems.sizes``) and chooses
among children by the interpreter's wall-clock time (no GPU timing). A kernel that reads its sizes from its inputs runs
at any size; a kernel converted from torch.compile's capture at the test sizes (``seeds.inductor``) holds
those sizes as literals, and so do its descendants by offline operators, which change launch constants only: it is
baked at the test sizes and cannot run at the full sizes the target GPU would see -- unless it was captured with
dynamic shapes and Dynamo kept no size a literal (its docstring says so: ``seeds.inductor.sizes.size_generic``),
as the interpreter's captures are where Inductor and the converter can. So, when the test sizes are not
the full sizes, the end of an interpreter run judges the fastest distinct correct kernels again for correctness
(``TRIES`` at most, fastest first, as many at once as the run evaluates, until one passes), with evaluators of their
own, at two other sizes that differ from the test sizes in every size constant (``size_sets``: about 3/4, and odd
below that), each kernel at each size a worker job of its own. Each gets a verdict per size (``size_verdict``):
runs-correct, refuses-cleanly (forward's ValueError: a converted seed's guard, ``seeds.inductor.input_guard``) or
defective (anything else wrong). The run's best (``best_kernel.py``, the summary, the table, the report) is the fastest
that runs correctly there too (``kept``). When none does, the fastest that refuses them cleanly is the best
(``chosen``), flagged: summary status ``BAKED``, a header in ``best_kernel.py``, a line of the table saying no kernel
that runs at other sizes was found. A defective kernel is never the best, save where every kernel tried is: then
the fastest stays, flagged ``DEFECTIVE_STATUS``. On a GPU ``evo.reports.sizes_label`` uses the same judging.

``SizesCheck.plan`` (before the search: the start line) and ``SizesCheck.judge`` (after it) are what
``evo.runs.run.execute`` calls; the verdict is a record in the run store's meta (``SIZES_CHECK``), which
``evo.reports.outcome.summarise`` (and so the report) reads back through ``verdict`` and ``rows``. A GPU run judges at
the full sizes: none of this, but ``evo.reports.sizes_label``.
"""
from __future__ import annotations

import contextlib
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable


from evo.records.checkpoint import Checkpoint
from evo.records.meta import SIZES_CHECK
from evo.records.store import RunStore
from fitness.evaluation.evaluator import Evaluator
from fitness.evaluation.from_config import fitness_parts
from fitness.evaluation.plan import JudgePlan
from core.individual import Individual
from fitness.measure.result import NO_VERDICT
from fitness.problems.problem import INDUCTOR, ProblemSpec, load_problem
from fitness.workers.sandbox import Sandbox
from fitness.problems.sizes import OtherSizes, other_sizes
from core.individual import LAUNCHES
from seeds.inductor.sizes import size_generic

log = logging.getLogger(f"kernelevo.{__name__}")

TRIES = 4  # distinct kernels judged again at the other sizes, fastest first (the batch where one passes ends it)
BAKED = "baked-at-test-sizes"  # summary.json's status when no kernel tried runs at other sizes
TRIAL = re.compile(r"^trial \d+ \(input seed \d+\): ")  # how the judge's reasons start (fitness/judge/trials.py)
BAKED_HEADER = "# kernelevo: BAKED AT THE TEST SIZES {sizes}: {why}\n"
# a kernel's verdict at each other size, and over them all (the worst: defective, then refuses-cleanly)
RUNS, REFUSES, DEFECTIVE = "runs-correct", "refuses-cleanly", "defective"
REFUSAL = "ValueError: "  # how the judge's reason starts where forward refused the inputs (seeds.inductor.input_guard)
DEFECTIVE_STATUS = "defective-at-other-sizes"  # summary.json's status when every kernel tried was defective there
DEFECTIVE_HEADER = "# kernelevo: DEFECTIVE AT OTHER SIZES: {why}\n"


def sizes_text(sizes: dict) -> str:
    """Size constants as a line says them: ``N=4096, M=512``."""
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


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
    ``seeds.inductor.input_guard``), defective (wrong values, a wrong shape, a CUDA error, a crash, any other
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
    may be what bakes a size in), best first by the search's ranking (``core.individual.ranked_by``; the hall of
    fame's first before any other of equal rank), at most `limit`."""
    correct = sorted((ind for ind in store.individuals() if ind.ok), key=lambda ind: (ind.rank, ind.id != fastest))
    by_kernel: dict[str, Individual] = {}
    for ind in correct:
        by_kernel.setdefault(ind.key, ind)
    return list(by_kernel.values())[:limit]


def verdict(store: RunStore, fastest: str | None) -> dict | None:
    """The stored verdict when it judged the run whose fastest kernel is `fastest` (None: none, or an older one)."""
    record = store.get_meta(SIZES_CHECK)
    return record if record is not None and record.get("fastest") == fastest else None


def chosen(record: dict | None) -> str | None:
    """The run's best by the check: the kernel kept (correct at the other sizes), else the fastest that refuses them
    cleanly (None: neither; an older record: its kept)."""
    return (record or {}).get("chosen", (record or {}).get("kept"))


def defective(record: dict | None) -> bool:
    """Whether every kernel tried at other sizes was defective there (or without a verdict, one at least defective):
    the fastest stays the best, flagged, with no kernel of the run fit to be called at other sizes."""
    return bool(record and record["tried"] and chosen(record) is None
                and any(t.get("verdict") == DEFECTIVE for t in record["tried"]))


def baked(record: dict | None) -> bool:
    """Whether the run's best is baked at the test sizes: kernels were tried at other sizes, none ran there, and the
    best refuses them cleanly (or, from an older record, failed there)."""
    return bool(record and record["tried"] and record["kept"] is None and not defective(record))


def verdict_of(tried: dict) -> str:
    """A tried kernel's verdict in words: ``defective (incorrect: ...)``, ``refuses-cleanly (ValueError: ...)``."""
    what, reason = tried.get("verdict") or tried["status"], tried["reason"]  # an older record: its status
    if what == DEFECTIVE:
        reason = f"{tried['status']}: {reason}" if reason else tried["status"]
    return what + (f" ({reason})" if reason else "")


def _failures(record: dict) -> str:
    """Which kernels failed at the other sizes and why, those failing alike together:
    `1.1, 0.1 defective (incorrect: ...)`."""
    why: dict[str, list] = {}
    for t in record["tried"]:
        if t["status"] != "ok":
            why.setdefault(verdict_of(t), []).append(t["id"])
    return "; ".join(f"{', '.join(ids)} {reason}" for reason, ids in why.items())


def sets_text(record: dict) -> str:
    """The other sizes judged at, as a line says them: ``N=12; N=11``."""
    return "; ".join(sizes_text(changed) for changed in record.get("size_sets") or [record["other_sizes"]])


def verdict_text(record: dict) -> str:
    """One line: what was tried at the other sizes and what came of it."""
    if not record["test_sizes"]:
        return f"runs at the full sizes: yes, judged at them ({record['why_not']})"
    if not record["other_sizes"]:
        return f"runs at other sizes: not checked ({record['why_not']})"
    tried, at = record["tried"], sets_text(record)
    if not tried:
        return f"runs at other sizes: not checked (no correct kernel to judge at {at})"
    failed = _failures(record)
    if record["kept"] is not None:
        return (f"runs at other sizes: {record['kept']} is correct at {at}, kept as the best ({len(tried)} tried"
                + (f"; failed: {failed}" if failed else "") + ")")
    if defective(record):
        return (f"runs at other sizes: no kernel that runs at other sizes or refuses them cleanly was found "
                f"({len(tried)} tried at {at}; failed: {failed}); the best at the test sizes, {record['fastest']}, "
                f"is {DEFECTIVE} at other sizes: it must not be called at any but the test sizes "
                f"({sizes_text(record['test_sizes'])})")
    best = chosen(record) or record["fastest"]
    return (f"runs at other sizes: no kernel that runs at other sizes was found ({len(tried)} tried at {at}; failed: "
            f"{failed}); the best at the test sizes that is not defective there, {best}, is baked at the "
            f"test sizes ({sizes_text(record['test_sizes'])}) and cannot run at the full sizes")
def rows(record: dict | None) -> list[tuple[str, str]]:
    """The table's and the report's lines on selection and sizes (none for a run without a verdict: on a GPU)."""
    if record is None:
        return []
    label, _, text = verdict_text(record).partition(": ")
    lines = [("judged at", f"the test sizes {sizes_text(record['test_sizes'])}" if record["test_sizes"] else
              "the full sizes (the test sizes)")]
    if record["baked_seeds"]:
        lines.append(("compiler seeds", f"{', '.join(record['baked_seeds'])}: captured at the test sizes; they and "
                                        f"their offline descendants are baked there"))
    if record.get("generic_seeds"):
        lines.append(("compiler seeds", f"{', '.join(record['generic_seeds'])}: captured with dynamic shapes; they "
                                        f"read their sizes from their inputs"))
    return lines + [(label, text)]


def flagged(source: str, record: dict | None) -> str:
    """The best kernel's file: its source, under a header saying so when it is baked at the test sizes or defective
    at other sizes."""
    if defective(record):
        return DEFECTIVE_HEADER.format(why=f"every kernel tried failed at other sizes ({_failures(record)[:300]}); "
                                           f"it runs correctly at the test sizes only") + source
    if not baked(record):
        return source
    return BAKED_HEADER.format(sizes=sizes_text(record["test_sizes"]),
                               why=f"it failed at other sizes ({_failures(record)[:300]}); it does not run at the "
                                   f"problem's full sizes") + source
