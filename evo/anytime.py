"""A run's anytime curve: its best speed-up so far against what the search had spent, in GPU-seconds (the
evaluations' wall time, summed in the order they were stored) and in LLM cost (dollars; LLM calls where no call had
a price, e.g. a local server), from the run store alone. It is part of summary.json (``anytime``), so every bench and
multirun row carries it, and it is drawn in the run's report and, one line per search seed, on the bench's and
multirun's pages.

A curve is a step function kept at its steps: a point at the first evaluation, at each one that raised a speed-up
column's best (``speedup_vs_*``: every baseline the verdicts carry), and at the end of the run.
"""
from __future__ import annotations

from dataclasses import fields

from evo.intervals import SPEEDUP_PREFIX, label
from evo.page import figure_png, pyplot
from fitness.formatting import speedup
from fitness.result import EvalResult

COLUMNS = [f.name for f in fields(EvalResult) if f.name.startswith(SPEEDUP_PREFIX)]
SPENT = ("evaluations", "gpu_s", "llm_cost_usd", "llm_calls")  # what each point says was spent
STYLES = ("-", "--", ":", "-.")


def curve(history: list, spend: list) -> dict:
    """The curve of `history` ([(stored at, EvalResult)] in order, ``RunStore.evaluation_history``) with the LLM
    requests of `spend` ([(recorded at, dollars)], ``RunStore.llm_spend``) counted up to each evaluation: {"columns":
    the speed-up columns any correct kernel has, "points": [{evaluations, gpu_s, llm_cost_usd, llm_calls, and per
    column the best so far (None before the first)}]}. No point where no kernel has a speed-up (the interpreter)."""
    columns = [c for c in COLUMNS if any(r.ok and getattr(r, c) for _, r in history)]
    if not columns:
        return {"columns": [], "points": []}
    best: dict = dict.fromkeys(columns)
    points, gpu_s, paid = [], 0.0, 0
    for count, (when, result) in enumerate(history, 1):
        gpu_s += result.eval_wall_s or 0.0
        while paid < len(spend) and spend[paid][0] <= when:
            paid += 1
        improved = False
        for c in columns:
            value = getattr(result, c) if result.ok else None
            if value and (best[c] is None or value > best[c]):
                best[c], improved = value, True
        if improved or count == 1:
            points.append(_point(count, gpu_s, spend[:paid], best))
    end = _point(len(history), gpu_s, spend, best)
    if end != points[-1]:
        points.append(end)
    return {"columns": columns, "points": points}


def _point(evaluations: int, gpu_s: float, paid: list, best: dict) -> dict:
    return {"evaluations": evaluations, "gpu_s": round(gpu_s, 3),
            "llm_cost_usd": round(sum(cost for _, cost in paid), 6), "llm_calls": len(paid), **best}


def run_curve(store) -> dict:
    """The anytime curve of the run in `store` (``evo.store.RunStore``)."""
    return curve(store.evaluation_history(), store.llm_spend())


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


def plot(curves: list[tuple[str, dict]], title: str) -> bytes:
    """The curves (each labelled: a seed, or '' for a run's own), best speed-up so far against GPU-seconds and,
    when the runs called an LLM, against its cost; one colour per curve, one line style per speed-up column. PNG."""
    llm = llm_axis([c for _, c in curves])
    fig, axes = pyplot().subplots(1, 2 if llm else 1, figsize=(10 if llm else 5.5, 3.2), squeeze=False)
    colours = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    for axis, (x, name) in zip(axes[0], [("gpu_s", "GPU-seconds (evaluation wall time)"), *([llm] if llm else [])]):
        for i, (tag, data) in enumerate(curves):
            for j, column in enumerate(data.get("columns", [])):
                xs, ys = _steps(data["points"], x, column)
                if xs:
                    axis.step(xs, ys, where="post", color=colours[i % len(colours)], ls=STYLES[j % len(STYLES)],
                              label=" ".join(part for part in (tag, label(column)) if part))
        axis.set(xlabel=name, ylabel="best speed-up so far", title=title)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7)
    return figure_png(fig, dpi=90)


def curve_rows(data: dict) -> list[list]:
    """The points as table rows (evaluations, GPU-seconds, LLM cost, LLM calls, then each column's best)."""
    return [[p["evaluations"], f"{p['gpu_s']:.1f}", f"${p['llm_cost_usd']:.4f}", p["llm_calls"],
             *[speedup(p.get(c)) for c in data["columns"]]] for p in data["points"]]


def curve_header(data: dict) -> list[str]:
    return ["evaluations", "GPU-seconds", "LLM cost", "LLM calls", *[f"best {label(c)}" for c in data["columns"]]]
