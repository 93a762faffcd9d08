"""Without a GPU, which kernels run at the problem's full sizes: the run's best is one that does, measured.

On Triton's CPU interpreter a run judges its candidates at small test sizes (``fitness.problems.sizes``) and chooses
among children by the interpreter's wall-clock time (no GPU timing). A kernel that reads its sizes from its inputs runs
at any size; a kernel converted from torch.compile's capture at the test sizes (``seeds.inductor``) holds
those sizes as literals, and so do its descendants by offline operators, which change launch constants only: it is
baked at the test sizes and cannot run at the full sizes the target GPU would see -- unless it was captured with
dynamic shapes and Dynamo kept no size a literal (its docstring says so: ``seeds.inductor.sizes.size_generic``),
as the interpreter's captures are where Inductor and the converter can. So, when the test sizes are not
the full sizes, the end of an interpreter run judges the fastest distinct correct kernels again (``TRIES`` at most,
fastest first, as many at once as the run evaluates, until one passes), with an evaluator of their own, at other
sizes that differ from the test sizes in every size constant (``fitness.problems.sizes.other_sizes``); the run's best
(``best_kernel.py``, the summary, the table, the report) is the fastest that is correct there too. When none is, the
fastest at the test sizes stays the best kernel, flagged: summary status ``BAKED``, a header in ``best_kernel.py``,
a line of the table saying no kernel that runs at other sizes was found.

``SizesCheck.plan`` (before the search: the start line) and ``SizesCheck.judge`` (after it) are what
``evo.runs.run.execute`` calls; the verdict is a record in the run store's meta (``META``), which
``evo.reports.outcome.summarise`` (and so the report) reads back through ``verdict`` and ``rows``. A GPU run judges at
the full sizes: none of this.
"""
from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace


from evo.records.checkpoint import Checkpoint
from evo.records.store import RunStore
from fitness.evaluation.evaluator import Evaluator
from fitness.evaluation.from_config import fitness_parts
from fitness.evaluation.plan import JudgePlan
from core.individual import Individual
from fitness.problems.problem import INDUCTOR, ProblemSpec, load_problem
from fitness.workers.sandbox import Sandbox
from fitness.problems.sizes import other_sizes
from seeds.inductor.sizes import size_generic

log = logging.getLogger(f"kernelevo.{__name__}")

TRIES = 4  # distinct kernels judged again at the other sizes, fastest first (the batch where one passes ends it)
META = "sizes_check"  # the run store's meta key of the verdict
BAKED = "baked-at-test-sizes"  # summary.json's status when no kernel tried runs at other sizes
TRIAL = re.compile(r"^trial \d+ \(input seed \d+\): ")  # how the judge's reasons start (fitness/workers/worker.py)
BAKED_HEADER = "# kernelevo: BAKED AT THE TEST SIZES {sizes}: {why}\n"


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

    @classmethod
    def plan(cls, judge: JudgePlan, evaluator, seeds: list) -> "SizesCheck":
        """The check for a run judged by `evaluator` (on the interpreter) whose generation 0 is `seeds`."""
        target, spec = evaluator.target, evaluator.problem
        judged = {k: v for k, v in target.evaluated_sizes.items() if target.sizes.get(k) != v}
        full = {k: target.sizes.get(k) for k in judged}
        if not judged:
            return cls(judge, {}, {}, None, {}, [], "the test sizes are the problem's full sizes")
        other = other_sizes(load_problem(spec))
        note = f"other sizes for the check of kernels baked at the test sizes: {other.describe()}"
        spec_other = None if other.why_not else replace(spec, sizes=other.sizes, size_note=note)
        baked, generic = baked_and_generic(seeds)
        return cls(judge, judged, full, spec_other, other.changed, baked, other.why_not, generic)

    def start_line(self) -> str:
        """The run's one line on how it chooses, at its start."""
        line = "selection among children: by interpreter wall-clock time (no GPU timing)"
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
                f"({sizes_text(self.other_sizes)}) and the best is the fastest correct there too")

    def judge(self, store: RunStore, checkpoint: Checkpoint | None, parallel: int = 1,
              sandbox: Sandbox | None = None) -> dict:
        """Judge the fastest distinct kernels at the other sizes, `parallel` at a time, until one passes; store and
        print the verdict, and return it. `sandbox`: the run's evaluator's, still open, whose fork server then
        serves this check too (None: a sandbox of its own)."""
        fastest = checkpoint.hall_of_fame[0] if checkpoint is not None and checkpoint.hall_of_fame else None
        record = {"fastest": fastest, "test_sizes": self.test_sizes, "full_sizes": self.full_sizes,
                  "other_sizes": self.other_sizes, "baked_seeds": self.baked_seeds,
                  "generic_seeds": self.generic_seeds, "tried": [], "kept": None,
                  "why_not": self.why_not}
        tries = candidates(store, fastest) if self.other is not None else []
        if tries:
            with evaluator_at(self.other, self.judge_plan, sandbox, parallel) as evaluator, \
                    ThreadPoolExecutor(parallel) as pool:
                for start in range(0, len(tries), parallel):
                    batch = tries[start:start + parallel]
                    results = list(pool.map(lambda ind: evaluator.evaluate(ind.genome.rendered(),
                                                                           label=f"other sizes: {ind.id}"), batch))
                    record["tried"] += [{"id": ind.id, "status": result.status, "reason": first_line(result)}
                                        for ind, result in zip(batch, results)]
                    record["kept"] = next((ind.id for ind, result in zip(batch, results) if result.ok), None)
                    if record["kept"] is not None:
                        break
        store.set_meta(META, record)
        if self.other is not None:
            log.info(f"{verdict_text(record)}")
        return record


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
    may be what bakes a size in), fastest first (the hall of fame's first before any other of equal time), at most
    `limit`."""
    correct = sorted((ind for ind in store.individuals() if ind.ok), key=lambda ind: (ind.time_s, ind.id != fastest))
    by_kernel: dict[str, Individual] = {}
    for ind in correct:
        by_kernel.setdefault(ind.key, ind)
    return list(by_kernel.values())[:limit]


def verdict(store: RunStore, fastest: str | None) -> dict | None:
    """The stored verdict when it judged the run whose fastest kernel is `fastest` (None: none, or an older one)."""
    record = store.get_meta(META)
    return record if record is not None and record.get("fastest") == fastest else None


def baked(record: dict | None) -> bool:
    """Whether the run's best is baked at the test sizes: kernels were tried at other sizes and none passed."""
    return bool(record and record["tried"] and record["kept"] is None)


def _failures(record: dict) -> str:
    """Which kernels failed at the other sizes and why, those failing alike together: `1.1, 0.1 incorrect (...)`."""
    why: dict[str, list] = {}
    for t in record["tried"]:
        if t["status"] != "ok":
            why.setdefault(f"{t['status']}" + (f" ({t['reason']})" if t["reason"] else ""), []).append(t["id"])
    return "; ".join(f"{', '.join(ids)} {reason}" for reason, ids in why.items())


def verdict_text(record: dict) -> str:
    """One line: what was tried at the other sizes and what came of it."""
    if not record["test_sizes"]:
        return f"runs at the full sizes: yes, judged at them ({record['why_not']})"
    if not record["other_sizes"]:
        return f"runs at other sizes: not checked ({record['why_not']})"
    tried, at = record["tried"], sizes_text(record["other_sizes"])
    if not tried:
        return f"runs at other sizes: not checked (no correct kernel to judge at {at})"
    failed = _failures(record)
    if record["kept"] is not None:
        return (f"runs at other sizes: {record['kept']} is correct at {at}, kept as the best ({len(tried)} tried"
                + (f"; failed: {failed}" if failed else "") + ")")
    return (f"runs at other sizes: no kernel that runs at other sizes was found ({len(tried)} tried at {at}; failed: "
            f"{failed}); the best at the test sizes, {record['fastest']}, is baked at the "
            f"test sizes ({sizes_text(record['test_sizes'])}) and cannot run at the full sizes")


def rows(record: dict | None) -> list[tuple[str, str]]:
    """The table's and the report's lines on selection and sizes (none for a run without a verdict: on a GPU)."""
    if record is None:
        return []
    label, _, text = verdict_text(record).partition(": ")
    at = f" at the test sizes {sizes_text(record['test_sizes'])}" if record["test_sizes"] else ""
    lines = [("selection", f"by interpreter wall-clock time (no GPU timing){at}")]
    if record["baked_seeds"]:
        lines.append(("compiler seeds", f"{', '.join(record['baked_seeds'])}: captured at the test sizes; they and "
                                        f"their offline descendants are baked there"))
    if record.get("generic_seeds"):
        lines.append(("compiler seeds", f"{', '.join(record['generic_seeds'])}: captured with dynamic shapes; they "
                                        f"read their sizes from their inputs"))
    return lines + [(label, text)]


def flagged(source: str, record: dict | None) -> str:
    """The best kernel's file: its source, under a header saying so when it is baked at the test sizes."""
    if not baked(record):
        return source
    return BAKED_HEADER.format(sizes=sizes_text(record["test_sizes"]),
                               why=f"it failed at other sizes ({_failures(record)[:300]}); it does not run at the "
                                   f"problem's full sizes") + source
