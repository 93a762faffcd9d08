"""A run's anytime curve: its best speed-up so far against what the search had spent: evaluations, GPU-seconds (the
evaluations' wall time), LLM calls and LLM cost (dollars; calls where no call had a price, e.g. a local server). One
curve, however the steps are taken: ``curve`` of the run store (the evaluations in the order they were stored, each
charged the LLM requests recorded by then; speed-ups over every baseline) is part of summary.json (``anytime``), so
every bench and multirun row carries it, and it is drawn in the run's report and, one line per search seed, on the
bench's and multirun's pages; the strategies experiment takes a run's lineage in fold order (``best_so_far`` of its
own steps; the speed-up over the tuned seed, evo.benchmark.strategies_report).

A curve is a step function kept at its steps: a point at the first step, at each one that raised a speed-up
column's best (``speedup_vs_*``: every baseline the verdicts carry), and at the end of the run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from evo.reports.intervals import SPEEDUP_PREFIX, label
from evo.reports.page import figure_png, pyplot
from fitness.common.formatting import number, speedup
from kernelevo.core.evaluation_record import EvalResult

COLUMNS = [f.name for f in fields(EvalResult) if f.name.startswith(SPEEDUP_PREFIX)]
SPENT = ("evaluations", "gpu_s", "llm_cost_usd", "llm_calls")  # what each point says was spent
STYLES = ("-", "--", ":", "-.")
GPU_AXIS = ("gpu_s", "GPU-seconds (evaluation wall time)")


@dataclass(frozen=True)
class Step:
    """One step of a run: what it spent (on top of the steps before it) and the speed-up its kernel reached in each
    column (None or missing: none, e.g. an incorrect kernel)."""
    speedups: dict = field(default_factory=dict)
    evaluations: int = 0
    gpu_s: float = 0.0
    llm_calls: int = 0
    llm_cost_usd: float = 0.0


def best_so_far(steps, columns: list[str]) -> dict:
    """The curve of `steps` (Step, in the order they were taken): {"columns": `columns`, "points": [{evaluations,
    gpu_s, llm_cost_usd, llm_calls: spent up to it, and per column the best so far (None before the first)}]}, a
    point at the first step, at each that raised a column's best, and at the end; no point without a step."""
    best: dict = dict.fromkeys(columns)
    points, spent = [], dict.fromkeys(SPENT, 0)
    for count, step in enumerate(steps, 1):
        for unit in SPENT:
            spent[unit] += getattr(step, unit)
        improved = False
        for c in columns:
            value = step.speedups.get(c)
            if value and (best[c] is None or value > best[c]):
                best[c], improved = value, True
        if improved or count == 1:
            points.append(_point(spent, best))
    if points and _point(spent, best) != points[-1]:
        points.append(_point(spent, best))
    return {"columns": list(columns), "points": points}


def _point(spent: dict, best: dict) -> dict:
    return {"evaluations": spent["evaluations"], "gpu_s": round(spent["gpu_s"], 3),
            "llm_cost_usd": round(spent["llm_cost_usd"], 6), "llm_calls": spent["llm_calls"], **best}


def curve(history: list, spend: list) -> dict:
    """The curve of `history` ([(stored at, EvalResult)] in order, ``RunStore.evaluation_history``), a step per
    evaluation, with the LLM requests of `spend` ([(recorded at, dollars)], ``RunStore.llm_spend``) charged to the
    first evaluation stored after them (those after the last, to the end), against every speed-up column any
    correct kernel has. No point where no kernel has a speed-up (the interpreter)."""
    columns = [c for c in COLUMNS if any(r.ok and getattr(r, c) for _, r in history)]
    if not columns:
        return {"columns": [], "points": []}

    def steps():
        paid = 0
        for when, result in history:
            now = paid
            while paid < len(spend) and spend[paid][0] <= when:
                paid += 1
            yield Step({c: getattr(result, c) for c in columns} if result.ok else {}, 1, result.eval_wall_s or 0.0,
                       paid - now, sum(cost for _, cost in spend[now:paid]))
        yield Step(llm_calls=len(spend) - paid, llm_cost_usd=sum(cost for _, cost in spend[paid:]))

    return best_so_far(steps(), columns)


def run_curve(store) -> dict:
    """The anytime curve of the run in `store` (``evo.records.store.RunStore``)."""
    return curve(store.evaluation_history(), store.llm_spend())


def interpreter_curve(history: list) -> list[dict]:
    """What a run on Triton's CPU interpreter has instead of speed-ups, against its evaluations (`history` as for
    ``curve``): the correct kernels so far and the best interpreter wall-clock time so far (None before the first
    correct one), a point at the first evaluation, at each that changed either, and at the last. Empty on a GPU."""
    if not any(result.timer == "interpreter" for _, result in history):
        return []
    points, correct, best = [], 0, None
    for count, (_, result) in enumerate(history, 1):
        changed = count == 1
        if result.ok:
            correct, changed = correct + 1, True
            if result.time_s is not None and (best is None or result.time_s < best):
                best = result.time_s
        if changed:
            points.append({"evaluations": count, "correct": correct, "best_s": best})
    if points and points[-1]["evaluations"] != len(history):
        points.append({"evaluations": len(history), "correct": correct, "best_s": best})
    return points


def plot_interpreter(curves: list[tuple[str, list]]) -> bytes:
    """Interpreter curves (``interpreter_curve``, each labelled: a search seed or '') side by side: correct kernels
    so far, and the best interpreter wall-clock time so far, against evaluations; where no kernel was correct, the
    second panel says so instead of drawing empty axes. PNG. The panels' titles do not name the problem (the page
    does, above the plot): a multirun's names, its overrides with a file's path, ran over each other."""
    from matplotlib.ticker import MaxNLocator

    timed = any(p["best_s"] is not None for _, points in curves for p in points)
    fig, axes = pyplot().subplots(1, 2 if timed else 1, figsize=(10 if timed else 5.5, 3.0), squeeze=False)
    left = axes[0][0]
    for tag, points in curves:
        xs = [p["evaluations"] for p in points]
        left.step(xs, [p["correct"] for p in points], where="post", marker=".", label=tag or None)
        best = [(p["evaluations"], p["best_s"] * 1e3) for p in points if p["best_s"] is not None]
        if best:
            axes[0][1].step(*zip(*best), where="post", marker=".", label=tag or None)
    most = max((p["correct"] for _, points in curves for p in points), default=0)
    last = max((p["evaluations"] for _, points in curves for p in points), default=1)
    left.set(xlabel="evaluations", ylabel="correct kernels so far", ylim=(0, max(most, 1) * 1.05), xlim=(0, last),
             title="correct kernels" + ("" if timed else " (none correct)"))
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    if timed:
        axes[0][1].set(xlabel="evaluations", ylabel="ms (interpreter wall-clock)", title="best time so far")
        axes[0][1].xaxis.set_major_locator(MaxNLocator(integer=True))
    for axis in axes[0]:
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    return figure_png(fig, dpi=90)


def llm_axis(curves: list[dict]) -> tuple[str, str] | None:
    """What the LLM axis counts for these curves: dollars where any call had a price, else calls; None when no LLM
    call was made (offline operators)."""
    ends = [c["points"][-1] for c in curves if c.get("points")]
    if any(end["llm_cost_usd"] > 0 for end in ends):
        return "llm_cost_usd", "LLM cost ($)"
    if any(end["llm_calls"] > 0 for end in ends):
        return "llm_calls", "LLM calls (no price known)"
    return None


def _steps(points: list, x: str, column: str) -> tuple[list, list]:
    """The x and best values of one column, from its first value on."""
    kept = [(p[x], p[column]) for p in points if p.get(column) is not None]
    return [a for a, _ in kept], [b for _, b in kept]


def plot(curves: list[tuple[str, dict]], title: str, x_axes: list[tuple[str, str]] | None = None,
         ylabel: str = "best speed-up so far") -> bytes:
    """The curves (each labelled: a seed, a strategy, or '' for a run's own), best speed-up so far against each of
    `x_axes` ([(point key, axis label)]; by default GPU-seconds and, when the runs called an LLM, its cost) side by
    side; one colour per label (curves of one label share it), one line style per speed-up column. PNG."""
    if x_axes is None:
        llm = llm_axis([c for _, c in curves])
        x_axes = [GPU_AXIS, *([llm] if llm else [])]
    wide = len(x_axes) > 1
    fig, axes = pyplot().subplots(1, len(x_axes), figsize=(10 if wide else 5.5, 3.2), squeeze=False)
    cycle = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {tag: cycle[i % len(cycle)] for i, tag in enumerate(dict.fromkeys(tag for tag, _ in curves))}
    for axis, (x, name) in zip(axes[0], x_axes):
        for tag, data in curves:
            for j, column in enumerate(data.get("columns", [])):
                xs, ys = _steps(data["points"], x, column)
                if xs:
                    axis.step(xs, ys, where="post", color=colours[tag], ls=STYLES[j % len(STYLES)],
                              label=" ".join(part for part in (tag, label(column)) if part))
        axis.set(xlabel=name, ylabel=ylabel, title=title)
        axis.grid(alpha=0.3)
        handles = dict(zip(*reversed(axis.get_legend_handles_labels())))  # one entry per label
        if handles:
            axis.legend(handles.values(), handles.keys(), fontsize=7)
    return figure_png(fig, dpi=90)


def curve_rows(data: dict) -> list[list]:
    """The points as table rows (evaluations, GPU-seconds, LLM cost, LLM calls, then each column's best)."""
    return [[p["evaluations"], number(p["gpu_s"], "{:.1f}"), number(p["llm_cost_usd"], "${:.4f}"), p["llm_calls"],
             *[speedup(p.get(c)) for c in data["columns"]]] for p in data["points"]]


def curve_header(data: dict) -> list[str]:
    return ["evaluations", "GPU-seconds", "LLM cost", "LLM calls", *[f"best {label(c)}" for c in data["columns"]]]
