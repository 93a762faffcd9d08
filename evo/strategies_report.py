"""The strategies experiment's table and page (``experiment=strategies``): the search strategies (evo.strategy) over
problems and seeds at an equal budget, read back from the sweep's run stores.

Every run is read in the order its children were folded in (the lineage; the same for any timing), each child
charged what it spent: its LLM requests (from the cache or not: a replay makes the same ones) and their cost, and
the evaluations its tuning was the first to ask for (their keys in its tuning record) with their seconds
(``eval_wall_s``: GPU-seconds on a GPU). The run's fixed budget (``search.max_evaluations``, ``search.max_gpu_s``,
``llm.budget.max_calls``, ``llm.budget.max_cost_usd``) cuts that sequence as the search does (a child counts when
the children before it had not spent it; no later one does), so every strategy is compared at the same budget
however many children were still in flight at its end, and the table is a function of the lineage and its
measurements alone: a replay gives the same (exactly, under an LLM budget, with one child in flight: the client
refuses requests in the order they come). The evaluations of a debugger's failing drafts are
not in any tuning record: they count in a run's own budget, not here.

Per problem and strategy: the best speed-up over the tuned seed (median over seeds and a bootstrap interval), the
correct rate of the children, LLM calls and cost, and both per unit of gain; the page adds the anytime curves (best
speed-up vs LLM calls, or evaluations when no call was made, and vs evaluation seconds) side by side.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from evo.intervals import Bootstrap, median_interval

STEM = "strategies"
BUDGETS = (("evaluations", ("search", "max_evaluations")), ("gpu_s", ("search", "max_gpu_s")),
           ("calls", ("llm", "budget", "max_calls")), ("cost_usd", ("llm", "budget", "max_cost_usd")))


class StrategiesReport(Callback):
    """Hydra callback of ``experiment=strategies``: the table and page once every run of the sweep has returned."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        path = write_strategies_report(Path(config.hydra.sweep.dir).resolve())
        if path is not None:
            print(f"[strategies] table and page: {path} (also {STEM}.md, {STEM}.json)", flush=True)


def _get(config: dict, path: tuple):
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


def strategy_name(config: dict) -> str:
    """The run's strategy by name (evolution for a run saved before strategies existed)."""
    from hydra.utils import get_class

    target = _get(config, ("search", "strategy", "_target_"))
    return get_class(target).name if target else "evolution"


def _call_cost(call: dict, llm: dict) -> float:
    """A request's cost: its tokens at the run's per-token prices when set (a replayed request's too), else what was
    recorded when it was paid."""
    if llm.get("input_cost_per_token") is None and llm.get("output_cost_per_token") is None:
        return call["cost_usd"] or 0.0
    return ((call["prompt_tokens"] or 0) * (llm.get("input_cost_per_token") or 0.0)
            + (call["completion_tokens"] or 0) * (llm.get("output_cost_per_token") or 0.0))


def run_record(run_dir: Path) -> dict:
    """One run: its problem, strategy, seed, budget, the timer of its measurements, and a point per individual in
    fold order (what was spent up to it, and the best speed-up so far), cut at the budget."""
    from evo.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        config, individuals = store.get_meta("config") or {}, store.individuals()
        evaluations, calls = store.evaluations(), store.llm_calls()
    finally:
        store.close()
    llm = config.get("llm") or {}
    budget = {unit: _get(config, path) for unit, path in BUDGETS if _get(config, path) is not None}
    by_child: dict[str, list] = {}
    for call in calls:
        by_child.setdefault(call["individual"], []).append(call)
    seed = individuals[0] if individuals else None
    seed_s = seed.time_s if seed is not None and seed.ok else None
    spent = {"calls": 0, "cost_usd": 0.0, "evaluations": 0, "gpu_s": 0.0}
    paid, points, best_s = set(), [], float("inf")
    for ind in individuals:
        own = by_child.get(ind.id, [])
        keys = [trial["key"] for trial in ind.tuning.get("trials", []) if trial.get("key")] + [ind.key]
        new = [key for key in dict.fromkeys(keys) if key not in paid and key in evaluations]
        paid.update(new)
        after = {"calls": spent["calls"] + len(own), "cost_usd": spent["cost_usd"] + sum(_call_cost(c, llm)
                                                                                           for c in own),
                 "evaluations": spent["evaluations"] + len(new),
                 "gpu_s": spent["gpu_s"] + sum(evaluations[key].eval_wall_s for key in new)}
        if ind.generation > 0 and any(spent[unit] >= limit for unit, limit in budget.items()):
            break  # the budget was spent before it: the search's own rule (no child begins then); none counts
        spent, best_s = after, min(best_s, ind.time_s)
        points.append({"id": ind.id, "ok": ind.ok, **{k: round(v, 6) for k, v in spent.items()},
                       "speedup": round(seed_s / best_s, 6) if seed_s and best_s < float("inf") else None})
    timers = {result.timer for result in evaluations.values() if result.timer}
    return {"problem": _get(config, ("problem", "name")) or "?", "strategy": strategy_name(config),
            "seed": _get(config, ("search", "seed")), "budget": budget, "timer": ",".join(sorted(timers)),
            "points": points}


def _per_gain(spent: float, speedup: float | None) -> float | None:
    """What one unit of speed-up gained cost (None without a gain, or where nothing was spent)."""
    return spent / (speedup - 1.0) if spent and speedup is not None and speedup > 1.0 else None


def summary_rows(runs: list[dict]) -> list[dict]:
    """Per problem and strategy (in the order first met): the best speed-up's median and interval over seeds,
    the correct rate of the children, and medians of what was spent, in all and per unit of gain."""
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((run["problem"], run["strategy"]), []).append(run)
    rows = []
    for (problem, strategy), group in groups.items():
        last = [run["points"][-1] for run in group if run["points"]]
        speedups = [p["speedup"] for p in last if p["speedup"] is not None]
        children = [p for run in group for p in run["points"] if p["id"].split(".")[0] != "0"]
        interval = median_interval(speedups, Bootstrap.default())  # conf/intervals.yaml, as the bench's
        median, low, high = (interval.value, interval.low, interval.high) if interval else (None, None, None)

        def med(values):
            values = [v for v in values if v is not None]
            return statistics.median(values) if values else None

        rows.append({"problem": problem, "strategy": strategy, "seeds": len(group),
                     "speedup": median, "speedup_low": low, "speedup_high": high,
                     "correct_rate": sum(p["ok"] for p in children) / len(children) if children else None,
                     "children": len(children), **{unit: med(p[unit] for p in last) for unit in
                                                   ("calls", "cost_usd", "evaluations", "gpu_s")},
                     "calls_per_gain": med(_per_gain(p["calls"], p["speedup"]) for p in last),
                     "cost_per_gain": med(_per_gain(p["cost_usd"], p["speedup"]) for p in last),
                     "runs_with_gain": sum(1 for s in speedups if s > 1.0)})
    return rows


def _f(value, fmt: str = "{:.3g}") -> str:
    return "–" if value is None else fmt.format(value)


HEADER = ("problem", "strategy", "seeds", "best speed-up", "correct rate", "LLM calls", "cost (USD)", "evaluations",
          "eval seconds", "calls per gain", "cost per gain")


def _cells(r: dict) -> list[str]:
    speedup = ("–" if r["speedup"] is None else f"{r['speedup']:.3f}x (one seed: no interval)"
               if r["speedup_low"] is None else f"{r['speedup']:.3f}x [{r['speedup_low']:.3f}, {r['speedup_high']:.3f}]")
    return [r["problem"], r["strategy"], str(r["seeds"]), speedup,
            f"{_f(r['correct_rate'], '{:.0%}')} ({r['children']})", _f(r["calls"], "{:g}"),
            _f(r["cost_usd"], "{:.4f}"), _f(r["evaluations"], "{:g}"), _f(r["gpu_s"], "{:.1f}"),
            _f(r["calls_per_gain"]), _f(r["cost_per_gain"], "{:.4f}")]


def caption(budget: dict, timer: str) -> str:
    budget_text = ", ".join(f"{unit} {limit:g}" for unit, limit in budget.items()) or "search.generations only"
    return (f"Budget per run: {budget_text}. Speed-up: the best kernel's time over the tuned seed's ({timer or '?'}"
            f"{'; interpreter wall-clock, not GPU figures' if 'interpreter' in timer else ''}); median over seeds "
            f"[{Bootstrap.default().describe()} interval; none for one seed]. Correct rate: of the children (how many). Per gain: spent / "
            f"(speed-up - 1), median over the runs that gained.")


def markdown(rows: list[dict], budget: dict, timer: str) -> str:
    lines = [caption(budget, timer), "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def curves_png(runs: list[dict], problem: str) -> bytes:
    """Best speed-up vs LLM calls (evaluations when no call was made) and vs evaluation seconds, side by side: a
    thin line per run, coloured by strategy."""
    from evo.page import figure_png, pyplot

    plt = pyplot()
    mine = [run for run in runs if run["problem"] == problem]
    x_first = "calls" if any(p["calls"] for run in mine for p in run["points"]) else "evaluations"
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    colours = {}
    for run in mine:
        colour = colours.setdefault(run["strategy"], f"C{len(colours)}")
        points = [p for p in run["points"] if p["speedup"] is not None]
        for axis, unit in zip(axes, (x_first, "gpu_s")):
            axis.step([p[unit] for p in points], [p["speedup"] for p in points], where="post", color=colour,
                      alpha=0.7, label=run["strategy"])
    for axis, label in zip(axes, ("LLM calls" if x_first == "calls" else "evaluations", "evaluation seconds")):
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("best speed-up over the tuned seed")
    handles = {h.get_label(): h for h in axes[0].get_lines()}
    axes[1].legend(handles.values(), handles.keys(), fontsize=8, loc="lower right")
    fig.suptitle(problem)
    return figure_png(fig)


def write_strategies_report(sweep_dir: Path) -> Path | None:
    """strategies.md, .json and .html in the sweep directory (None when it holds no run); the table printed."""
    from evo.multirun import run_dirs
    from evo.page import Raw, esc, page, png_img, table

    dirs = run_dirs(sweep_dir)
    if not dirs:
        return None
    runs = [{**run_record(d), "run": str(d.relative_to(sweep_dir))} for d in dirs]
    budgets = {json.dumps(run["budget"], sort_keys=True) for run in runs}
    budget = runs[0]["budget"] if len(budgets) == 1 else {}
    timer = ",".join(sorted({run["timer"] for run in runs if run["timer"]}))
    rows = summary_rows(runs)
    text = markdown(rows, budget, timer)
    warning = "" if len(budgets) == 1 else \
        f"The runs do not share one budget ({' / '.join(sorted(budgets))}): not an equal-budget comparison."
    if warning:
        text = f"**{warning}**\n\n{text}"
    (sweep_dir / f"{STEM}.md").write_text(text)
    (sweep_dir / f"{STEM}.json").write_text(json.dumps({"budget": budget, "timer": timer, "rows": rows,
                                                        "runs": runs}, indent=1) + "\n")
    head = (f"<p><b>{esc(warning)}</b></p>" if warning else "") + f"<p class='note'>{esc(caption(budget, timer))}</p>"
    sections = [(None, Raw(head + table(HEADER, map(_cells, rows))))]
    sections += [(f"Anytime curves: {problem}", png_img(curves_png(runs, problem), problem))
                 for problem in dict.fromkeys(run["problem"] for run in runs)]
    html = sweep_dir / f"{STEM}.html"
    html.write_text(page(f"kernelevo strategies: {len(runs)} runs", sections))
    print(text, flush=True)
    return html


if __name__ == "__main__":  # python -m evo.strategies_report SWEEP_DIR: the table again from the run stores
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m evo.strategies_report SWEEP_DIR")
    print(write_strategies_report(Path(sys.argv[1]).resolve()) or f"{sys.argv[1]}: no run stores under it")
