"""The bench's table per KernelBench level, as a paper reports it: per level the problems attempted and the correct
rate (of those attempted and of all the level's problems), KernelBench's fast_p (correct and more than p times
faster) and the geometric mean of the speed-ups against each baseline, against the best of them and against the
best baseline a Triton kernel could be (``fitness.measure.baselines.triton_best``: one that calls no library kernel),
with intervals over search seeds where there are two or more; the runs without a correct kernel grouped by cause
(``cause_of``: a short key from the row's reason), and the problems whose best baseline is a library call that
policy ``triton`` forbids a candidate (cuBLAS, cuDNN), and the correct GPU kernels that run only at the problem's
sizes (``evo.runs.other_sizes``: they failed at other sizes; a row from before that check reads "not checked").
``evo.benchmark.bench_report`` writes these sections into
bench.md, bench.json and bench.html.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from evo.benchmark.bench import INTERRUPTED, NOT_STARTED, Row
from evo.reports.sizes_record import BAKED, DEFECTIVE_STATUS, LABEL, NOT_CHECKED
from evo.reports.intervals import Bootstrap, geomean_interval
from evo.reports.outcome import OK, RunOutcome
from evo.reports.report import STATUS_HEADER, reason_heads
from fitness.measure.baselines import BASELINES, BEST, library_of, triton_best
from fitness.common.formatting import percent

TRITON_BEST = "triton_best"  # the fastest baseline known to call no library kernel
AGAINST = (*BASELINES, BEST, TRITON_BEST)
NAMES = {"eager": "eager", "compile": "compile", "max_autotune": "max-autotune", BEST: "best baseline",
         TRITON_BEST: "best Triton-expressible baseline"}
FAST_P = (0.0, 1.0, 1.5)
OTHER = "other"  # the level of a problem that is not under a levelN/ folder (a bundled problem)


def level_of(name: str) -> str:
    """A row's KernelBench level from its problem's name (level1/23_Softmax.py -> level1; a multirun's row names the
    file's path: problem=/x/KernelBench/level1/23_Softmax.py -> level1); OTHER for the rest."""
    found = re.search(r"(?:^|[/=])(level\d+)/[^/\s]+$", name.split()[0] if name.split() else name)
    return found.group(1) if found else OTHER


def speedup_of(s: RunOutcome, against: str) -> float | None:
    """A correct kernel's speed-up over a baseline, the best, or the best Triton-expressible one (None: unknown)."""
    if against == TRITON_BEST:
        found = triton_best(vars(s))
        return found[1] if found else None
    return s.speedup(against)


def library_best(s: RunOutcome) -> str:
    """'max-autotune (cuBLAS extern_kernels.mm)' where the run's best baseline calls a library kernel; '' where it
    does not or it is not known."""
    kernels = library_of(vars(s), s.best_baseline) if s.best_baseline else None
    return f"{NAMES.get(s.best_baseline, s.best_baseline)} ({', '.join(kernels)})" if kernels else ""


def sizes_note(s: RunOutcome) -> str:
    """A correct GPU kernel's note where it runs only at the problem's sizes or was not checked at others ("": it
    runs at other sizes too, or an interpreter run: ``evo.reports.sizes_record`` says its own)."""
    if s.interpreter or s.runs_at_other_sizes:
        return ""
    return f"{LABEL}: {s.other_sizes_note or NOT_CHECKED}"


# causes ------------------------------------------------------------------------------------------------------------
CAUSES = (  # (pattern on the reason, the cause key: groups of the pattern filled in), first match wins
    (r"^timed out", "timeout"),  # first: its reason quotes the last line of progress, which may name anything
    (r"calls library kernels \(([^)]*)\)", "library call: {0}"),
    (r"Inductor generated no Triton kernel", "no Triton from Inductor"),
    (r"calls the ATen operator (\S+) directly", "converter: ATen operator {0}"),
    (r"grid type '?(\w+)'? is (?:not converted|unknown)", "converter: grid {0}"),
    (r"the converter failed on Inductor's code for .*? \((\w+)", "converter: {0}"),
    (r"torch\.compile of .* did not finish within", "timeout: torch.compile's capture"),
    (r"torch\.compile of .* failed", "torch.compile failed"),
    (r"^(?:exit code \d+: )?kernel \w+: ", "converter: kernel"),
    (r"baseline timing failed|baselines? .*failed", "baseline failed"),
)
INCORRECT = ((r"^coverage trial", "coverage trial"), (r"^trial \d+", "trial"),
             (r"^the output of a timed call differs", "timed call"))


def cause_of(row: Row) -> str | None:
    """A short key of why a run has no correct kernel (None: it has one), from its status and reason: `library
    call: torch.convolution`, `converter: <exception type>`, `incorrect: <trial kind>`, `timeout`, `no Triton from
    Inductor`, `baseline failed`, ...; rows of an interrupted bench are `interrupted` or `not started`."""
    if row.status in (OK, BAKED, DEFECTIVE_STATUS):
        return None
    if row.status in (INTERRUPTED, NOT_STARTED):
        return row.status
    reason = (row.summary.reason or row.reason or "").strip()
    for pattern, key in CAUSES:
        found = re.search(pattern, reason)
        if found:
            return key.format(*found.groups())
    status = row.summary.status or row.status
    if status == "incorrect":
        kind = next((k for pattern, k in INCORRECT if re.search(pattern, reason)), "other")
        return f"incorrect: {kind}"
    if status == "rejected":
        return f"rejected: {reason.split(':', 1)[0][:40]}" if reason else "rejected"
    if status == "failed":
        found = re.match(r"(exit code -?\d+)", reason)
        return f"run failed ({found.group(1)})" if found else "run failed"
    head = reason.splitlines()[0].split(":", 1)[0][:40] if reason else ""  # compile_error: InterpreterError
    return f"{status}: {head}" if status and head else status or "unknown"


def failure_of(row: Row) -> str:
    """Why a row has no correct kernel, in words: its run's failure (the first line of its best kernel's reason, or
    its seed's), then how its run ended or why it has none ("" for a row with a correct kernel)."""
    if row.status in (OK, BAKED):
        return ""
    failure = row.summary.reason.strip().splitlines()[0] if row.summary.reason.strip() else ""
    return "; ".join(filter(None, [failure, row.reason]))


def failure_reasons(rows: list[Row]) -> dict[str, str]:
    """cause -> its rows' reasons: their most common first lines with how many runs gave each
    (``evo.reports.report.reason_heads``)."""
    found: dict[str, list[str]] = {}
    for row in rows:
        cause = cause_of(row)
        if cause is not None:
            found.setdefault(cause, []).append(row.summary.reason or row.reason)
    return {cause: reason_heads(reasons) for cause, reasons in found.items()}


def failures(rows: list[Row]) -> dict[str, list[str]]:
    """cause -> the rows (labels) without a correct kernel for that cause, the most frequent cause first."""
    groups: dict[str, list[str]] = {}
    for row in rows:
        cause = cause_of(row)
        if cause is not None:
            groups.setdefault(cause, []).append(row.label)
    return dict(sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])))


# per level ---------------------------------------------------------------------------------------------------------
@dataclass
class Level:
    name: str
    size: int | None  # the level's problems in KernelBench (None: not known)
    rows: list

    @property
    def attempted(self) -> int:
        """The problems attempted (a multirun's configurations of one problem are one)."""
        return len({r.problem_name for r in self.rows if r.status != NOT_STARTED})

    @property
    def runs(self) -> int:
        return sum(1 for r in self.rows if r.status != NOT_STARTED)

    @property
    def seeds(self) -> int:
        """Runs per configuration (a row name): its search seeds."""
        configurations = len({r.name for r in self.rows if r.status != NOT_STARTED})
        return max(1, round(self.runs / configurations)) if configurations else 1

    def correct(self) -> list[Row]:
        return [r for r in self.rows if r.status in (OK, BAKED, DEFECTIVE_STATUS)]


def levels(rows: list[Row], sizes: dict | None = None) -> list[Level]:
    """The rows by level (level1, level2, ..., then OTHER), each with its KernelBench size where `sizes` says it."""
    by: dict[str, list] = {}
    for row in rows:
        by.setdefault(level_of(row.name), []).append(row)
    order = sorted(by, key=lambda n: (n == OTHER, int(n[5:]) if n != OTHER else 0))
    return [Level(n, (sizes or {}).get(n), by[n]) for n in order]


def level_summary(level: Level, boot: Bootstrap) -> dict:
    """One level's figures (JSON): correct counts and rates, fast_p and geometric means (with their intervals over
    search seeds) against each of AGAINST, and its problems whose best baseline is a library call."""
    correct = level.correct()
    runs = level.runs
    ok = [r for r in correct if r.status == OK]  # speed-ups: GPU times only (a baked kernel has none)
    against = {}
    for base in AGAINST:
        per_problem: dict[str, list] = {}
        for r in ok:
            value = speedup_of(r.summary, base)
            per_problem.setdefault(r.name, []).extend([value] if value else [])
        mean = geomean_interval(list(per_problem.values()), boot)
        against[base] = {**{f"fast_{p:g}": sum(1 for r in ok if (speedup_of(r.summary, base) or 0) > p) / runs
                            if runs else 0.0 for p in FAST_P},
                         "geomean": None if mean is None else vars(mean),
                         "measured": sum(1 for r in ok if speedup_of(r.summary, base))}
    library = {r.label: library_best(r.summary) for r in ok if library_best(r.summary)}
    on_gpu = [r for r in ok if not r.summary.interpreter]
    specialised = {r.label: sizes_note(r.summary) for r in on_gpu if r.summary.runs_at_other_sizes is False}
    return {"level": level.name, "size": level.size, "attempted": level.attempted, "runs": runs,
            "seeds": level.seeds, "correct": len(correct), "baked": sum(1 for r in correct if r.status == BAKED),
            "correct_of_attempted": len(correct) / runs if runs else 0.0,
            "correct_of_level": len(correct) / (level.size * level.seeds) if level.size else None,
            "against": against, "library_best": library, "specialised": specialised,
            "sizes_not_checked": sum(1 for r in on_gpu if r.summary.runs_at_other_sizes is None)}


def paper_summary(rows: list[Row], sizes: dict | None = None, boot: Bootstrap | None = None) -> dict:
    """The per-level figures and the failures by cause of a bench's rows (bench.json's `levels` and `failures`)."""
    boot = boot or Bootstrap.default()
    return {"levels": [level_summary(level, boot) for level in levels(rows, sizes)], "failures": failures(rows),
            "failure_reasons": failure_reasons(rows)}


# as tables ---------------------------------------------------------------------------------------------------------
def _geomean(entry: dict) -> str:
    mean = entry["geomean"]
    if mean is None:
        return "-"
    text = f"{mean['value']:.2f}x" + (f" [{mean['low']:.2f}x, {mean['high']:.2f}x]" if mean["low"] is not None
                                      else "")
    return f"{text} over {entry['measured']}"


def _specialised(level: dict) -> str:
    """The level's correct GPU kernels that run only at the problem's sizes, and how many were not checked."""
    unchecked = level.get("sizes_not_checked", 0)
    return f"{len(level.get('specialised', {}))}" + (f" ({unchecked} {NOT_CHECKED})" if unchecked else "")


def _level_name(level: str) -> str:
    return "other (not KernelBench)" if level == OTHER else level


def sections(paper: dict, gpu: bool) -> list[dict]:
    """The sections of the page and the markdown: each a title, a note and a table (header, rows)."""
    found = []
    # per level only where a row is of a KernelBench level (a sweep of bundled problems read "other | ?" there)
    per_level = paper["levels"] if any(lv["level"] != OTHER for lv in paper["levels"]) else []
    if per_level:
        correctness = [[_level_name(lv["level"]), "-" if lv["level"] == OTHER else str(lv["size"] or "?"),
                        str(lv["attempted"]),
                        f"{lv['correct']} of {lv['runs']}" + (f" ({lv['seeds']} seeds)" if lv["seeds"] > 1 else ""),
                        percent(lv["correct_of_attempted"]), percent(lv["correct_of_level"]), str(lv["baked"]),
                        str(len(lv["library_best"])), _specialised(lv)] for lv in per_level]
        found.append({"title": "Per level: correct", "note": "correct: the run's best kernel passed every trial; of "
                      "the level: over all the level's problems in KernelBench (those not attempted count as not "
                      "correct)",
                      "header": ["level", "problems", "attempted", "correct runs", "of attempted", "of the level",
                                 "baked (CPU)", "best baseline a library call", "only at the problem's sizes (GPU)"],
                      "rows": correctness})
    if gpu and per_level:
        speed = [[_level_name(lv["level"]), NAMES[base], *[percent(entry[f"fast_{p:g}"]) for p in FAST_P],
                  _geomean(entry)] for lv in per_level for base, entry in lv["against"].items()]
        found.append({"title": "Per level: fast_p and geometric means", "note": "fast_p: the share of the "
                      "attempted runs whose kernel is correct and more than p times faster than the baseline (one "
                      "not measured counts as not faster); the geometric mean over the correct kernels with that "
                      "baseline, with its interval over search seeds where there are two or more. The best "
                      "Triton-expressible baseline: the fastest whose code calls no library kernel (cuBLAS, cuDNN) "
                      "that policy triton forbids a kernel",
                      "header": ["level", "against", *[f"fast_{p:g}" for p in FAST_P], "geometric mean"],
                      "rows": speed})
    if gpu:
        library = [[name, text] for lv in paper["levels"] for name, text in lv["library_best"].items()]
        if library:
            found.append({"title": "Best baseline a library call", "note": "problems whose fastest baseline runs a "
                          "library kernel that policy triton forbids a candidate; their speed-up over the best "
                          "Triton-expressible baseline is in the table above",
                          "header": ["problem", "best baseline"], "rows": library})
        specialised = [[name, text] for lv in paper["levels"] for name, text in lv.get("specialised", {}).items()]
        if specialised:
            found.append({"title": "Only at the problem's sizes", "note": "problems whose best kernel is correct at "
                          "the problem's sizes but failed at other sizes (each size constant moved to about 3/4): "
                          "its speed-up holds at those sizes only",
                          "header": ["problem", "other sizes"], "rows": specialised})
    reasons = paper.get("failure_reasons", {})  # a bench.json written before issue 68 has none
    causes = [[cause, str(len(names)), ", ".join(names), reasons.get(cause, "-") or "-"]
              for cause, names in paper["failures"].items()]
    found.append({"title": "Failures by cause", "note": "the runs without a correct kernel, grouped by a short key "
                  "of their reason, with the reasons' first lines (each row's full reason is in bench.json and its "
                  "run's report)", "header": ["cause", "runs", "problems", STATUS_HEADER[-1]],
                  "rows": causes or [["none", "0", "-", "-"]]})
    return found


def markdown_sections(paper: dict, gpu: bool) -> list[str]:
    lines = []
    for section in sections(paper, gpu):
        lines += ["", f"## {section['title']}", "", section["note"] + ".", "",
                  "| " + " | ".join(section["header"]) + " |", "|" + "---|" * len(section["header"]),
                  *["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in section["rows"]]]
    return lines


__all__ = ["AGAINST", "cause_of", "failure_of", "failure_reasons", "failures", "level_of", "levels", "library_best",
           "markdown_sections", "paper_summary", "sections", "sizes_note", "speedup_of"]
