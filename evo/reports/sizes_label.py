"""On a GPU, whether the run's best kernel also runs at sizes other than the problem's own, and a best that does not
fail there.

A GPU run judges its candidates at the problem's own sizes, and torch.compile's seeds are captured there with static
shapes (the sizes baked in as literals, each seed's forward guarding them: ``seeds.inductor.input_guard``), so the best
kernel may run only at those sizes: a speed-up that says nothing of any other shape (shape over-fitting). After the
search the fastest distinct correct kernels, fastest first (``full_size.candidates``), are judged for correctness only
(``Evaluator.correctness``: its trials and guards, no timing, no baseline measured) at other sizes (``full_size.
size_sets``: every size constant that can change moved to about 3/4, and to an odd value below that), each kernel at
each size a worker job of its own in the run's sandbox (a CUDA error costs that process only), until one is not
defective there: it runs correctly at every other size, or refuses them cleanly (its guard's ValueError). That one is
the run's best (``chosen``; the hall of fame's first where it is not defective): a kernel that reads or writes out of
bounds, returns a wrong shape or wrong values at another size is never the best. Where every kernel tried is defective,
the fastest stays the best with summary status ``defective-at-other-sizes`` and a header in ``best_kernel.py``.

``SizesLabel.plan`` (before the search) and ``SizesLabel.judge`` (after it) are what ``evo.runs.run.execute``
calls on a GPU; the verdict is a record in the run store's meta (``SIZES_LABEL``), which ``evo.reports.outcome.summarise``
reads back (``verdict``) into summary.json as ``runs_at_other_sizes`` (true, false, or null: not checked),
``other_sizes_note`` (the line: ``label``) and ``other_sizes_verdicts`` (each kernel tried: its verdict per size),
shown by the console table, the report and the bench table (``rows``), and in ``best_kernel.py``'s header when it runs
only at the problem's sizes (``flagged``). On the interpreter, ``evo.reports.full_size`` checks instead (there the test
sizes are not the problem's, and the best is chosen among the kernels that run at other sizes).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from evo.records.checkpoint import Checkpoint
from evo.records.meta import SIZES_LABEL
from evo.records.store import RunStore
from evo.reports.full_size import (DEFECTIVE, REFUSES, RUNS, candidates, judge_at_sizes, sets_text, size_sets,
                                   sizes_text, verdict_of)
from fitness.evaluation.plan import JudgePlan
from fitness.problems.problem import ProblemSpec, load_problem
from fitness.workers.sandbox import Sandbox

log = logging.getLogger(f"kernelevo.{__name__}")

LABEL = "runs at other sizes"  # the row's label in the tables
NOT_CHECKED = "not checked"
HEADER = "# kernelevo: RUNS ONLY AT THE PROBLEM'S SIZES: {why}\n"
DEFECTIVE_HEADER = "# kernelevo: DEFECTIVE AT OTHER SIZES: {why}\n"


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


def verdict(store: RunStore, best: str | None) -> dict | None:
    """The stored verdict when it judged `best` (None: none, or one of another kernel)."""
    record = store.get_meta(SIZES_LABEL)
    return record if record is not None and best is not None and record.get("best") == best else None


def defective(record: dict | None) -> bool:
    """Whether every kernel tried at the other sizes was defective there (the fastest stays the best, flagged)."""
    return bool(record and record.get("tried") and record["runs"] is False and record.get("chosen") is None)


def label(record: dict | None) -> tuple[bool | None, str]:
    """Whether the best kernel runs at other sizes (None: not checked) and the line that says so: the best's verdict
    and, where faster kernels were defective there and passed over, theirs."""
    if record is None:
        return None, ""
    if record["runs"] is None:
        return None, f"{NOT_CHECKED} ({record['why_not']})"
    at = sets_text(record)
    tried = record.get("tried", [])
    over = [f"{t['id']} {verdict_of(t)}" for t in tried if t["id"] != record.get("chosen")]
    if defective(record):
        return False, (f"no, {DEFECTIVE} at {at}: every kernel tried failed there ({'; '.join(over)[:600]}); the "
                       f"fastest is kept but must not be called at other sizes")
    over = f" ({record['chosen']} is the best: faster kernels defective there: {'; '.join(over)[:400]})" \
        if over else ""
    if record["runs"]:
        return True, f"yes, correct at {at} too" + over
    sizes = next((t["sizes"] for t in tried if t["id"] == record.get("chosen")), [])
    ran = "; ".join(size["at"] for size in sizes if size["verdict"] == RUNS)
    how = (f"refuses {'; '.join(size['at'] for size in sizes if size['verdict'] == REFUSES)} cleanly "
           f"({record['reason']})" + (f", correct at {ran}" if ran else "")) if sizes else \
        f"failed at {at}: {record['status']}" + (f" ({record['reason']})" if record["reason"] else "")  # older
    return False, f"no, specialised to the problem's sizes ({sizes_text(record['problem_sizes'])}); {how}{over}"


def rows(runs: bool | None, note: str, interpreter: bool) -> list[tuple[str, str]]:
    """The console table's and the report's line (none on the interpreter: ``evo.reports.full_size.rows``)."""
    return [] if interpreter else [(LABEL, note or NOT_CHECKED)]


def flagged(source: str, runs: bool | None, note: str, defective_there: bool = False) -> str:
    """The best kernel's file: its source, under a header saying so when it runs only at the problem's sizes, or
    is defective at other sizes (`defective_there`)."""
    if defective_there:
        return DEFECTIVE_HEADER.format(why=note[:400]) + source
    return source if runs is not False else HEADER.format(why=note[:400]) + source
