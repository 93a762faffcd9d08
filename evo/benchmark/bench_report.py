"""The bench's table and summary: per problem, and over the selection as KernelBench reports it (fast_p: the
fraction of *all* problems whose kernel is correct and more than p times faster than the baseline), written as
markdown, JSON and a static HTML page with plots."""
from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from pathlib import Path

from kernelevo.core.stats import geometric_mean, median
from evo.reports.anytime import plot as plot_anytime, plot_interpreter
from evo.benchmark.bench import RUNS, Row, slug
from evo.benchmark.bench_table import (failure_of, library_best, markdown_sections, paper_summary, sections,
                                       sizes_note)
from evo.reports.sizes_record import BAKED, DEFECTIVE_STATUS
from evo.reports.outcome import INTERPRETER, OK, RunOutcome
from evo.records.manifest import combine, manifest_rows
from evo.reports.intervals import Bootstrap, interval_lines, interval_table, seed_summary
from evo.reports.page import figure_png, link, pyplot, render
from evo.reports.report import HTML_FILE
from fitness.measure.baselines import (BASELINES, BEST, LABELS, NOT_MEASURED, STATUS_TEXT, admitted_speedup,
                                       best_text, triton_best)
from fitness.common.formatting import DASH, number, percent, seconds, speedup

FAST_P = (0.0, 1.0, 1.5, 2.0)
AGAINST = (*BASELINES, BEST)  # what fast_p and the geometric mean are computed against, each on its own
SHORT = {"eager": "eager", "compile": "compile", "max_autotune": "max-autotune", BEST: "best"}  # column names
NOTE_CHARS = 300  # a row's note at most (level3/49's: two baselines re-timed with IEEE fp32 dots, 254)


def summarise(rows: list[Row]) -> dict:
    n = len(rows)
    ok = [r.summary for r in rows if r.status == OK]
    baked = sum(1 for r in rows if r.status == BAKED)  # correct at the interpreter's test sizes only
    defective = sum(1 for r in rows if r.status == DEFECTIVE_STATUS)  # correct at its sizes, defective at others
    fast = {f"fast_{p:g}_vs_{base}": sum(1 for s in ok if (s.speedup(base) or 0) > p) / n if n else 0.0
            for base in AGAINST for p in FAST_P}  # a problem whose baseline was not measured counts as not fast
    sol = [s.sol_fraction for s in ok if s.sol_fraction is not None]
    floor = [s.floor_fraction for s in ok if s.floor_fraction is not None]
    rates = [r.summary.evaluations_per_hour for r in rows if r.summary.evaluations_per_hour]
    labelled = Counter(label for s in ok for label in s.labels)
    return {"problems": n, "distinct_problems": len({r.problem_name for r in rows}),
            "correct": len(ok) + baked + defective, "correct_rate": (len(ok) + baked + defective) / n if n else 0.0,
            "baked": baked, "defective_at_other_sizes": defective,
            # correct on a GPU at the problem's sizes only (evo.reports.sizes_record: failed at other sizes)
            "specialised": sum(1 for s in ok if not s.interpreter and s.runs_at_other_sizes is False),
            "labelled": dict(sorted(labelled.items())), **fast,
            **{f"geomean_vs_{base}": geometric_mean([s.speedup(base) for s in ok]) for base in AGAINST},
            # the correct kernels with a speed-up over each baseline (its geometric mean is over these)
            **{f"measured_vs_{base}": sum(1 for s in ok if s.speedup(base)) for base in AGAINST},
            "median_sol_fraction": median(sol),  # the reference algorithm's roofline
            "median_floor_fraction": median(floor),  # the data floor
            "median_evaluations_per_hour": median(rates),
            "min_evaluations_per_hour": min(rates) if rates else None,
            "device": "GPU" if any(r.gpu or r.summary.timer not in ("", INTERPRETER) for r in rows) else "CPU",
            "device_hours": sum(r.wall_s for r in rows) / 3600,  # each search holds one device for its wall time
            "llm_calls": sum(r.summary.llm_calls for r in rows),
            "llm_cost_usd": sum(r.summary.llm_cost_usd for r in rows)}


def _t(value) -> str:
    return seconds(value or None, DASH)


def summary_lines(summary: dict) -> list[str]:
    fast = lambda base: ", ".join(f"fast_{p:g} {summary[f'fast_{p:g}_vs_{base}']:.0%}" for p in FAST_P)  # noqa: E731
    sol = summary["median_sol_fraction"]
    speed = [f"vs {LABELS[base]}: {fast(base)}; geometric mean {speedup(summary[f'geomean_vs_{base}'])} over "
             f"{summary[f'measured_vs_{base}']} of {summary['correct']} correct kernels" for base in AGAINST
             if f"geomean_vs_{base}" in summary]
    speed.append(f"median fraction of the data floor: {percent(summary.get('median_floor_fraction'))}; of the "
                 f"reference algorithm's roofline: {percent(sol)} (over 100 %: fewer FLOPs than the reference)")
    if summary["device"] == "CPU":
        speed = ["no speed-ups: Triton's CPU interpreter (its times are wall-clock, not kernel speed; no baseline "
                 "measured)"]
    rate = summary.get("median_evaluations_per_hour")
    pace = ([f"search rate: median {rate:,.0f} evaluations/hour per problem, min "
             f"{summary['min_evaluations_per_hour']:,.0f}"] if rate else [])
    labelled = "".join(f"; {count} of them {label}" for label, count in summary.get("labelled", {}).items())
    seeds = summary.get("intervals", {}).get("seeds", 1)
    groups = len(summary.get("intervals", {}).get("problems", []))  # a row name each: a problem, or a configuration
    problems = summary.get("distinct_problems", groups)
    over = f"{groups} problems" if groups == problems else \
        f"{groups} configurations of {problems} problem{'s' if problems != 1 else ''}"
    runs = f" runs ({over} x up to {seeds} search seeds)" if seeds > 1 else f" runs ({over})" if groups != problems \
        else ""
    if summary["device"] == "GPU" and "intervals" in summary:
        speed += interval_lines(summary["intervals"])
    baked = (f"; {summary['baked']} of them correct at the test sizes only (baked there: they failed at other "
             f"sizes)" if summary.get("baked") else "")
    baked += (f"; {summary['specialised']} of them run only at the problem's sizes (they failed at other sizes)"
              if summary.get("specialised") else "")
    causes = (summary.get("paper") or {}).get("failures") or {}
    failing = (["without a correct kernel: " + "; ".join(f"{cause} {len(names)} ({_some(names)})"
                                                        for cause, names in causes.items())] if causes else [])
    return [f"correct: {summary['correct']} of {summary['problems']}{runs} ({summary['correct_rate']:.0%}){labelled}"
            f"{baked}",
            *failing, *speed, *pace,
            f"{summary['device']}-hours {summary['device_hours']:.2f}, LLM calls {summary['llm_calls']}, LLM cost "
            f"${summary['llm_cost_usd']:.2f}"]


def _some(names: list[str], shown: int = 3) -> str:
    """The first `shown` of `names`, and how many more."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


# a status as a table says it (summary.json keeps the key)
STATUS = {BAKED: "correct at test sizes only (baked)",
          DEFECTIVE_STATUS: "correct at its sizes, defective at other sizes"}
HEADER = ("problem", "status", "seed", "best from", "best", "seed (tuned)", *(SHORT[b] for b in BASELINES),
          *(f"vs {SHORT[b]}" for b in AGAINST), "data floor %", "ref. roofline %", "evaluations", "evals/h",
          "search (s)", "GPU busy", "timeouts", "cut", "LLM calls", "LLM cost", "wall (s)", "note")


def _missing(s: RunOutcome, base: str) -> str:
    """Why a row has no figure against `base`: its status (failed, too slow to compile, not measured) or "-"."""
    status = s.baseline_status.get(base)
    if status is None and s.interpreter:
        status = NOT_MEASURED
    return STATUS_TEXT.get(status or "", "-")


def baseline_cells(s: RunOutcome) -> list[str]:
    """A row's time of each baseline and speed-up over each and over the best (naming it), or why there is none."""
    times = [_t(s.baseline_s(b)) if s.baseline_s(b) else _missing(s, b) for b in BASELINES]
    speeds = [speedup(s.speedup(b)) if s.speedup(b) else _missing(s, b) for b in BASELINES]
    return [*times, *speeds, best_text(vars(s)) if s.speedup_vs_best else _missing(s, BEST)]


def library_note(s: RunOutcome) -> str:
    """Where a run's best baseline calls a library kernel (policy triton forbids a candidate one): which, and the
    speed-up over the best baseline a Triton kernel could be, where one is known ("": not a library call, or not
    known)."""
    library = library_best(s)
    if not library or s.speedup_vs_best is None:
        return ""
    triton = triton_best(vars(s))
    over = (f"; {speedup(triton[1])} over the best Triton-expressible baseline ({LABELS[triton[0]]})" if triton
            else "; no baseline known to be Triton-expressible")
    return f"best baseline: {library}{over}"


def tf32_note(s: RunOutcome) -> str:
    """Where a compiled baseline's own kernels, judged as seeds, were incorrect with TF32 dot products: the kernel
    (IEEE fp32 dots) is compared with a baseline timed with TF32 that the policy's tolerance would refuse; and the
    speed-up over it timed again with IEEE fp32 dots, where it was (the best Triton-expressible baseline counts
    that one)."""
    names = ", ".join(LABELS.get(name, name) for name in s.baselines_tf32_incorrect)
    again = ", ".join(f"{speedup(admitted_speedup(vars(s), name))} over {LABELS.get(name, name)} ({ieee_s * 1e3:.4g} "
                      f"ms)" for name, ieee_s in s.baselines_ieee_s.items())
    return (f"{names}: Inductor's kernels for it were incorrect with TF32 dot products (as seeds), yet it is timed "
            f"with TF32{'; with IEEE fp32 dots: ' + again if again else ''}" if names else "")


def from_caches(s: RunOutcome) -> str:
    """What a run read from the machine's caches (``from caches: seeds, baselines, 7 generation-0 verdicts``; ""
    for nothing), for the table's note."""
    found = [name for name, how in (("seeds", s.seed_cache), ("baselines", s.baseline_cache)) if how == "cached"]
    found += [f"{s.verdicts_reused} generation-0 verdicts"] if s.verdicts_reused else []
    return "from caches: " + ", ".join(found) if found else ""


def cells(r: Row) -> list[str]:
    s = r.summary
    correct = [library_note(s), tf32_note(s), sizes_note(s)] if r.status == OK else []
    note = "; ".join(filter(None, [*correct, failure_of(r) or r.reason if r.status != OK else s.stop_reason,
                                   from_caches(s)]))
    note = note.replace("|", "/").replace("\n", " ")
    interp = " (interpreter)" if s.interpreter else ""
    status = ", ".join([STATUS.get(r.status, r.status), *s.labels])  # ok, uses-torch-compute: the policy allowed it
    return [r.label, status, s.seed or "-", s.best_from or "-", _t(s.best_s) + (interp if s.best_s else ""),
            _t(s.seed_s),
            *baseline_cells(s), percent(s.floor_fraction), percent(s.sol_fraction), number(s.evaluations, "{}"),
            number(s.evaluations_per_hour), number(s.search_wall_s, "{:.0f}"), percent(s.gpu_busy),
            number(s.timeouts if s.evaluations is not None else None, "{}"),
            number(s.evaluations_cut if s.evaluations is not None else None, "{}"), str(s.llm_calls),
            f"${s.llm_cost_usd:.2f}", f"{r.wall_s:.0f}", note[:NOTE_CHARS]]


def row_line(r: Row) -> str:
    """A finished run as the bench prints it: its label, its status as the tables say it, and why where the run found
    no correct kernel."""
    why = f" {failure_of(r)[:200]}" if r.status not in (OK, BAKED) else ""
    seed = f"; seed: {r.summary.seed_cache}" if r.summary.seed_cache else ""
    seed += f"; baselines: {r.summary.baseline_cache}" if r.summary.baseline_cache else ""
    seed += f"; {r.summary.verdicts_reused} generation-0 verdict(s) cached" if r.summary.verdicts_reused else ""
    return f"[bench] {r.label}: {STATUS.get(r.status, r.status)} ({r.wall_s:.0f} s){why}{seed}"


SOL = ("data floor %", "ref. roofline %")  # the fractions of the data floor and of the reference's roofline
GPU_ONLY = (*(SHORT[b] for b in BASELINES), *(f"vs {SHORT[b]}" for b in AGAINST), *SOL, "GPU busy")
LLM = ("LLM calls", "LLM cost")
MAIN = ("problem", "status", "best", "seed (tuned)", *(f"vs {SHORT[b]}" for b in AGAINST), *SOL, "evaluations",
        "wall (s)")  # the page's table; the other columns are folded under it


def columns(rows: list[Row], summary: dict) -> list[str]:
    """The columns of HEADER that say something of these rows: none of a GPU's on the CPU interpreter (no baseline,
    speed-up or GPU figure there), no LLM columns where no run called one."""
    dropped = (GPU_ONLY if summary["device"] == "CPU" else ()) + \
        (LLM if not any(r.summary.llm_calls or r.summary.llm_cost_usd for r in rows) else ())
    return [h for h in HEADER if h not in dropped]


def pick(row: list, header: list[str]) -> list:
    """A row of HEADER's cells cut to `header`'s columns."""
    return [row[HEADER.index(h)] for h in header]


def markdown(rows: list[Row], summary: dict, title: str, reports: dict | None = None,
             manifest: dict | None = None) -> str:
    reports = reports or {}
    name = lambda r: f"[{r.label}]({reports[r.label]})" if r.label in reports else r.label  # noqa: E731
    header = columns(rows, summary)
    lines = [f"# {title}", "", *[f"- {line}" for line in summary_lines(summary)], "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(pick([name(r), *cells(r)[1:]], header)) + " |" for r in rows]
    if _with_intervals(summary):
        header, table_rows = interval_table(summary["intervals"])
        lines += ["", f"## Speed-ups over {summary['intervals']['seeds']} search seeds", "",
                  "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                  *["| " + " | ".join(row) + " |" for row in table_rows]]
    if "paper" in summary:
        lines += markdown_sections(summary["paper"], summary["device"] == "GPU")
    lines += ["", "## Manifest", "", *[f"- {fact}: {value}" for fact, value in manifest_rows(manifest)]]
    return "\n".join(lines) + "\n"


def _with_intervals(summary: dict) -> bool:
    """Whether the table has a speed-up per problem and search seed to give intervals of (GPU times, 2+ seeds)."""
    return summary["device"] == "GPU" and summary.get("intervals", {}).get("seeds", 0) > 1


def _anytime(rows: list[Row]) -> list[tuple[str, bytes]]:
    """Each problem's anytime curves drawn, one line per search seed (``evo.reports.anytime``)."""
    by_problem: dict[str, list] = {}
    for r in rows:
        if (r.summary.anytime or {}).get("points"):
            by_problem.setdefault(r.name, []).append(("" if r.search_seed is None else f"seed {r.search_seed}",
                                                      r.summary.anytime))
    return [(name, plot_anytime(curves, name)) for name, curves in by_problem.items()]


def _interpreter_curves(rows: list[Row]) -> list[tuple[str, bytes]]:
    """Each problem's interpreter curves (correct kernels and best time so far against evaluations), one line per
    search seed (``evo.reports.anytime.interpreter_curve``)."""
    by_problem: dict[str, list] = {}
    for r in rows:
        if r.summary.interpreter_curve:
            by_problem.setdefault(r.name, []).append(("" if r.search_seed is None else f"seed {r.search_seed}",
                                                      r.summary.interpreter_curve))
    return [(name, plot_interpreter(curves)) for name, curves in by_problem.items()]


def verdict_of(r: Row) -> str:
    """A row's kind, for the CPU page's plot: correct, correct at the test sizes only, incorrect, or no run."""
    if r.status == OK:
        return "correct"
    if r.status in (BAKED, DEFECTIVE_STATUS):
        return "correct at test sizes only"
    return "no correct kernel" if r.summary.evaluations else "run failed"


def short_label(label: str, chars: int = 48) -> str:
    """A row's label as a plot's axis says it: a path in it (a multirun's problem=/x/KernelBench/level1/19_ReLU.py)
    by its last two parts, the whole cut at `chars` (the page's table has it whole)."""
    label = re.sub(r"(?<![^\s=])/\S*/([^/\s]+/[^/\s]+)", r".../\1", label)
    return label if len(label) <= chars else label[:chars - 3] + "..."


def _cpu_plots(rows: list[Row]) -> bytes:
    """What a bench on the CPU interpreter has, as one PNG: each run's evaluations, the correct ones apart, and
    how many runs ended correct, correct at the test sizes only, incorrect or failed."""
    from matplotlib.ticker import MaxNLocator

    kinds = ("correct", "correct at test sizes only", "no correct kernel", "run failed")
    colours = ("#2a9d8f", "#e9c46a", "#e76f51", "#999999")
    height = max(3.2, 0.22 * len(rows) + 1.2)
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(10, height), gridspec_kw={"width_ratios": (3, 2)})
    labels = [short_label(r.label) for r in rows][::-1]
    curves = [r.summary.interpreter_curve for r in rows][::-1]
    correct = [curve[-1]["correct"] if curve else 0 for curve in curves]
    total = [r.summary.evaluations or 0 for r in rows][::-1]
    left.barh(labels, correct, color=colours[0], label="correct")
    left.barh(labels, [t - c if curve else 0 for t, c, curve in zip(total, correct, curves)], left=correct,
              color=colours[2], label="not correct")
    if any(t and not curve for t, curve in zip(total, curves)):  # a summary.json of before the curve was kept
        left.barh(labels, [0 if curve else t for t, curve in zip(total, curves)], color=colours[3],
                  label="correct ones not recorded")
    left.set(xlabel="evaluations", title="evaluations per run", xlim=(0, max(max(total, default=0), 1) * 1.4))
    left.tick_params(axis="y", labelsize=7)
    left.legend(fontsize=7, loc="upper right")  # right of the longest bar (xlim)
    counts = Counter(verdict_of(r) for r in rows)
    right.bar(range(len(kinds)), [counts.get(k, 0) for k in kinds], color=colours)
    right.set_xticks(range(len(kinds)), [textwrap.fill(k, 10) for k in kinds], fontsize=7)
    right.set(ylabel="runs", title="runs by outcome")
    right.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure_png(fig, dpi=90)


def _plots(rows: list[Row]) -> bytes:
    """Two plots as one PNG: the distribution of speed-ups over each baseline, and fast_p against p."""
    ok = [r.summary for r in rows if r.status == "ok"]
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(10, 3.6))
    for base in AGAINST:
        values = sorted(s.speedup(base) for s in ok if s.speedup(base))
        if values:
            left.hist(values, bins=20, alpha=0.4, label=f"vs {SHORT[base]}")
        ps = [p / 20 for p in range(0, 61)]
        right.plot(ps, [sum(1 for v in values if v > p) / max(len(rows), 1) for p in ps], label=f"vs {SHORT[base]}")
    left.set(xlabel="speed-up", ylabel="problems", title="speed-ups of correct kernels")
    right.set(xlabel="p", ylabel="fast_p", title="fast_p: correct and more than p times faster", ylim=(0, 1))
    for axis in (left, right):
        if axis.get_legend_handles_labels()[0]:
            axis.legend()
    return figure_png(fig, dpi=100)


def html(rows: list[Row], summary: dict, title: str, reports: dict, manifest: dict | None = None) -> str:
    """The combined page (evo/reports/templates/bench.html.j2); `reports`: row label -> the path (relative to the page)
    of its run's report.html."""
    intervals = None
    if _with_intervals(summary):
        header, interval_rows = interval_table(summary["intervals"])
        intervals = {"seeds": summary["intervals"]["seeds"], "header": header, "rows": interval_rows}
    header = columns(rows, summary)
    main = [h for h in header if h in MAIN]
    full = [[link(reports[r.label], r.label) if r.label in reports else r.label, *cells(r)[1:]] for r in rows]
    cpu = summary["device"] == "CPU"
    return render("bench.html.j2", title=title, lines=summary_lines(summary),
                  plots_png=_cpu_plots(rows) if cpu else _plots(rows), header=main,
                  rows=[pick(row, main) for row in full], details_header=header,
                  details=[pick(row, header) for row in full], intervals=intervals, cpu=cpu,
                  anytime=_interpreter_curves(rows) if cpu else _anytime(rows), manifest=manifest_rows(manifest),
                  sections=sections(summary["paper"], not cpu) if "paper" in summary else [])


SPEED = (*(f"vs {SHORT[b]}" for b in AGAINST), *SOL)
CONSOLE = ("problem", "status", "best", "seed (tuned)", *SPEED, "evaluations")


def console_table(rows: list[Row], reports: dict, base: Path) -> str:
    """The combined table for the terminal: one line per run, with the path of its report (on the CPU
    interpreter without the speed-up columns: it has none)."""
    gpu = summarise(rows)["device"] == "GPU"
    header = [h for h in CONSOLE if gpu or h not in SPEED] + ["report"]
    lines = [[cells(r)[HEADER.index(h)] for h in header[:-1]] + [str(base / reports[r.label])
                                                                 if r.label in reports else "-"] for r in rows]
    widths = [max(len(c) for c in column) for column in zip(header, *lines)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *lines])


def run_reports(base: Path, run_dirs: dict) -> dict:
    """name -> report.html of that run, relative to `base`, for the runs that have one."""
    return {name: str((Path(d) / HTML_FILE).relative_to(base)) for name, d in run_dirs.items()
            if (Path(d) / HTML_FILE).is_file()}


def bench_reports(bench_dir: Path, rows: list[Row]) -> dict:
    """Each problem's report.html in the bench (runs/<problem>/report.html), relative to the bench directory."""
    return run_reports(bench_dir, {r.label: bench_dir / RUNS / slug(r.name, r.search_seed) for r in rows})


def write_bench_report(bench_dir: Path, rows: list[Row], title: str, meta: dict, reports: dict | None = None,
                       stem: str = "bench", boot: Bootstrap | None = None) -> dict:
    """<stem>.md, .json and .html in `bench_dir` (`reports`: row label -> its run's report.html relative to
    `bench_dir`, linked from the page; by default the bench's runs/<problem>/report.html); returns the summary,
    with the intervals over search seeds made as `boot` says (by default as conf/intervals.yaml does), and the
    figures per KernelBench level and the failures by cause (``evo.benchmark.bench_table``; `meta`'s ``level_sizes``:
    each level's problems in KernelBench, for the correct rate over the whole level)."""
    boot = boot or Bootstrap.default()
    summary = {**summarise(rows), "intervals": seed_summary(rows, boot),
               "paper": paper_summary(rows, meta.get("level_sizes"), boot)}
    reports = bench_reports(bench_dir, rows) if reports is None else reports
    manifest = combine([r.summary.manifest for r in rows])  # its runs' manifests, gathered
    (bench_dir / f"{stem}.md").write_text(markdown(rows, summary, title, reports, manifest))
    (bench_dir / f"{stem}.json").write_text(json.dumps({"title": title, **meta, "summary": summary,
                                                         "manifest": manifest, "rows": [r.to_dict() for r in rows]},
                                                        indent=1) + "\n")
    (bench_dir / f"{stem}.html").write_text(html(rows, summary, title, reports, manifest))
    return summary
