"""On a GPU, whether the run's best kernel also runs at sizes other than the problem's own: a label, not a choice.

A GPU run judges its candidates at the problem's own sizes, and torch.compile's seeds are captured there with static
shapes (the sizes baked in as literals), so the best kernel may run only at those sizes: a speed-up that says
nothing of any other shape (shape over-fitting). After the search the run's best kernel -- the hall of fame's first,
and only it: one evaluation -- is judged for correctness only (``Evaluator.correctness``: its trials and
guards, no timing, no baseline measured) at other sizes (``fitness.problems.sizes.other_sizes``: every size constant
that can change moved to about 3/4), in the run's sandbox and under the GPU's shared lock as any correctness trial.
Which kernel is best and its figures do not change, nor does the run's status: the verdict is a label.

``SizesLabel.plan`` (before the search) and ``SizesLabel.judge`` (after it) are what ``evo.runs.run.execute``
calls on a GPU; the verdict is a record in the run store's meta (``META``), which ``evo.reports.outcome.summarise``
reads back (``verdict``) into summary.json as ``runs_at_other_sizes`` (true, false, or null: not checked) and
``other_sizes_note`` (the line: ``label``), shown by the console table, the report and the bench table (``rows``),
and in ``best_kernel.py``'s header when it runs only at the problem's sizes (``flagged``). On the interpreter,
``evo.reports.full_size`` checks instead (there the test sizes are not the problem's, and the best is chosen among
the kernels that run at other sizes).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from evo.records.checkpoint import Checkpoint
from evo.records.store import RunStore
from evo.reports.full_size import evaluator_at, first_line, sizes_text
from fitness.evaluation.plan import JudgePlan
from fitness.measure.result import CANCELLED, INFRASTRUCTURE
from fitness.problems.problem import ProblemSpec, load_problem
from fitness.problems.sizes import other_sizes
from fitness.workers.sandbox import Sandbox

log = logging.getLogger(f"kernelevo.{__name__}")

META = "sizes_label"  # the run store's meta key of the verdict
LABEL = "runs at other sizes"  # the row's label in the tables
NOT_CHECKED = "not checked"
HEADER = "# kernelevo: RUNS ONLY AT THE PROBLEM'S SIZES: {why}\n"


@dataclass
class SizesLabel:
    """What a GPU run knows before its search: its judge and the problem at the other sizes."""
    judge_plan: JudgePlan  # the run's: the check's evaluator is built from its parts
    problem_sizes: dict  # the changed size constants at the problem's sizes
    other_sizes: dict  # the same constants at the other sizes
    other: ProblemSpec | None  # the problem at the other sizes (None: no check)
    why_not: str = ""  # why there is no check

    @classmethod
    def plan(cls, judge: JudgePlan, evaluator) -> "SizesLabel":
        """The check of the best kernel of a run planned by `judge` and judged by `evaluator` (at its problem's
        sizes)."""
        spec = evaluator.problem
        loaded = load_problem(spec)
        other = other_sizes(loaded)
        if other.why_not:
            return cls(judge, {}, {}, None, other.why_not)
        note = f"other sizes for the label of the best kernel: {other.describe()}"
        return cls(judge, {k: loaded.sizes.get(k) for k in other.changed}, dict(other.changed),
                   replace(spec, sizes=other.sizes, size_note=note))

    def judge(self, store: RunStore, checkpoint: Checkpoint | None, sandbox: Sandbox | None = None) -> dict:
        """Judge the run's best kernel for correctness at the other sizes (once, untimed); store and log the
        verdict, and return it. `sandbox`: the run's evaluator's, still open (None: a sandbox of its own)."""
        best = checkpoint.hall_of_fame[0] if checkpoint is not None and checkpoint.hall_of_fame else None
        record = {"best": best, "problem_sizes": self.problem_sizes, "other_sizes": self.other_sizes,
                  "runs": None, "status": "", "reason": "", "why_not": self.why_not}
        individual = store.individual(best) if best is not None else None
        if self.other is not None and (individual is None or not individual.ok):
            record["why_not"] = "no correct kernel to judge"
        elif self.other is not None:
            try:
                result = self._correct(individual.genome.rendered(), best, sandbox)
            except Exception as exc:  # noqa: BLE001 - a label: whatever fails (the problem at the other sizes, a
                # ProblemError; the check's own evaluator), the run's figures and its summary stand
                record["why_not"] = (f"the problem cannot be judged at {sizes_text(self.other_sizes)}: "
                                     f"{type(exc).__name__}: {exc}")[:400]
            else:
                record.update(status=result.status, reason=first_line(result))
                if result.status in (INFRASTRUCTURE, CANCELLED):  # no verdict on the kernel
                    record["why_not"] = f"no verdict at {sizes_text(self.other_sizes)}: {record['reason']}"
                else:
                    record["runs"] = result.ok
        store.set_meta(META, record)
        log.info(f"{LABEL}: {label(record)[1]}")
        return record

    def _correct(self, source: str, best: str, sandbox: Sandbox | None):
        """The kernel judged for correctness only at the other sizes, by an evaluator of its own in `sandbox`."""
        with evaluator_at(self.other, self.judge_plan, sandbox) as evaluator:
            return evaluator.correctness(source, label=f"other sizes: {best}")


def verdict(store: RunStore, best: str | None) -> dict | None:
    """The stored verdict when it judged `best` (None: none, or one of another kernel)."""
    record = store.get_meta(META)
    return record if record is not None and best is not None and record.get("best") == best else None


def label(record: dict | None) -> tuple[bool | None, str]:
    """Whether the best kernel runs at other sizes (None: not checked) and the line that says so."""
    if record is None:
        return None, ""
    if record["runs"] is None:
        return None, f"{NOT_CHECKED} ({record['why_not']})"
    at = sizes_text(record["other_sizes"])
    if record["runs"]:
        return True, f"yes, correct at {at} too"
    return False, (f"no, specialised to the problem's sizes ({sizes_text(record['problem_sizes'])}); failed at {at}: "
                   f"{record['status']}" + (f" ({record['reason']})" if record["reason"] else ""))


def rows(runs: bool | None, note: str, interpreter: bool) -> list[tuple[str, str]]:
    """The console table's and the report's line (none on the interpreter: ``evo.reports.full_size.rows``)."""
    return [] if interpreter else [(LABEL, note or NOT_CHECKED)]


def flagged(source: str, runs: bool | None, note: str) -> str:
    """The best kernel's file: its source, under a header saying so when it runs only at the problem's sizes."""
    return source if runs is not False else HEADER.format(why=note[:400]) + source
