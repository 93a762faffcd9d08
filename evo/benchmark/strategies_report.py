"""The strategies experiment's table and page (``experiment=strategies``): the search strategies
(evo.evolution.strategy) over problems and seeds at an equal budget, read back from the sweep's runs: each run's outcome
record (summary.json, ``evo.reports.outcome.RunOutcome``: its problem, timer and tuned seed) and its run store (config
and lineage).

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
speed-up vs LLM calls, or evaluations when no call was made, and vs evaluation seconds) side by side: each run's
lineage is its anytime curve (``evo.reports.anytime.best_so_far``), one step per individual.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from kernelevo.core.stats import median
from evo.records.meta import CONFIG
from evo.reports.anytime import GPU_AXIS, Step, best_so_far, plot
from evo.reports.intervals import Bootstrap, Interval, median_interval
from evo.reports.outcome import SUMMARY_FILE, RunOutcome
from fitness.common.formatting import DASH, number, percent

STEM = "strategies"
SEED_COLUMN = "speedup_vs_seed"  # the curve's column: the best kernel's speed-up over the tuned seed
BUDGETS = (("evaluations", ("search", "max_evaluations")), ("gpu_s", ("search", "max_gpu_s")),
           ("llm_calls", ("llm", "budget", "max_calls")), ("llm_cost_usd", ("llm", "budget", "max_cost_usd")))


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


@dataclass(frozen=True)
class NoKernel:
    """A child that spent LLM calls and made no kernel (no usable reply, or its plan's code failed to parse): it
    counts as a child, not correct."""
    id: str
    generation: int
    parents: tuple = ()
    ok: bool = False
    time_s: float = math.inf
    tuning: dict = field(default_factory=dict)
    key: str = ""


def _order(ind) -> tuple:
    generation, _, slot = ind.id.partition(".")
    return int(generation), int(slot or 0)


def lineage_steps(individuals: list, evaluations: dict, calls: list, llm: dict, seed_s: float | None):
    """Each child in fold order -- every individual, and every child that spent calls but made no kernel
    (``NoKernel``) -- as an anytime step (child, Step): the LLM requests its operator sent and their cost (at the
    run's prices, `llm`; the requests of no child, the initialiser's, go to the first seed), the evaluations its
    tuning was the first to ask for and their seconds, and its speed-up over the tuned seed's time `seed_s` (none
    when the seed or the kernel failed)."""
    by_child: dict[str, list] = {}
    for call in calls:
        by_child.setdefault(call["individual"] or "", []).append(call)
    known = {ind.id for ind in individuals}
    failed = [NoKernel(child, _order(SimpleNamespace(id=child))[0]) for child in by_child
              if child and child not in known and not child.startswith("0.")]
    paid: set = set()
    for index, ind in enumerate(sorted([*individuals, *failed], key=_order)):
        own = by_child.get(ind.id, []) + (by_child.get("", []) if index == 0 else [])
        keys = [trial["key"] for trial in ind.tuning.get("trials", []) if trial.get("key")] + [ind.key]
        new = [key for key in dict.fromkeys(keys) if key and key not in paid and key in evaluations]
        paid.update(new)
        gain = {SEED_COLUMN: seed_s / ind.time_s} if seed_s and ind.ok and math.isfinite(ind.time_s) else {}
        yield ind, Step(gain, len(new), sum(evaluations[key].eval_wall_s or 0.0 for key in new), len(own),
                        sum(_call_cost(call, llm) for call in own))


def depth_reached(children: list) -> int:
    """The longest chain of children, each made from the one before (1: every child made from a seed)."""
    by_id, depth = {ind.id: ind for ind in children}, {}

    def of(ind) -> int:
        if ind.id not in depth:
            depth[ind.id] = 1 + max((of(by_id[p]) for p in ind.parents if p in by_id), default=0)
        return depth[ind.id]
    return max((of(ind) for ind in children), default=0)


def within(steps, budget: dict) -> list:
    """The steps the run's `budget` ({spent unit: limit}) counts, by the search's own rule: generation 0 always, a
    child when the steps before it had spent less than every limit, and none after the first that had not."""
    spent, counted = dict.fromkeys(budget, 0), []
    for ind, step in steps:
        if ind.generation > 0 and any(spent[unit] >= limit for unit, limit in budget.items()):
            break
        for unit in budget:
            spent[unit] += getattr(step, unit)
        counted.append((ind, step))
    return counted


@dataclass
class StrategyRun:
    """One run of the sweep: its outcome (summary.json), strategy, search seed and budget, and its lineage cut at
    that budget: the children counted, how many of them were correct, and the anytime curve of the best speed-up
    over the tuned seed (``evo.reports.anytime``)."""
    run: str
    outcome: RunOutcome
    strategy: str
    seed: int | None
    budget: dict
    children: int
    correct: int
    depth: int
    curve: dict

    @property
    def interpreter(self) -> bool:
        return "interpreter" in (self.outcome.timer or "")

    @property
    def problem(self) -> str:
        return self.outcome.problem or "?"

    @property
    def end(self) -> dict | None:
        """The curve's last point: what the run spent within its budget and the best speed-up it reached."""
        return self.curve["points"][-1] if self.curve["points"] else None

    def to_dict(self) -> dict:
        """For strategies.json: what a replay of the run gives again (none of the outcome's wall times)."""
        seconds = seconds_key(self.outcome.timer)
        curve = {**self.curve, "points": [{(seconds if k == "gpu_s" else k): v for k, v in point.items()}
                                          for point in self.curve["points"]]}
        return {"run": self.run, "problem": self.problem, "strategy": self.strategy, "seed": self.seed,
                "budget": self.budget, "timer": self.outcome.timer, "children": self.children,
                "correct": self.correct, "depth": self.depth, "llm_calls": self.end["llm_calls"] if self.end else 0,
                "curve": curve}


def run_record(run_dir: Path, sweep_dir: Path | None = None) -> StrategyRun:
    """One run (named by its path under `sweep_dir`): its outcome, strategy, seed and budget, and its lineage in
    fold order cut at the budget."""
    from evo.records.store import RunStore

    outcome = RunOutcome.read(run_dir)
    store = RunStore(run_dir, create=False)
    try:
        config, individuals = store.get_meta(CONFIG) or {}, store.individuals()
        evaluations, calls = store.evaluations(), store.llm_calls()
    finally:
        store.close()
    budget = {unit: _get(config, path) for unit, path in BUDGETS if _get(config, path) is not None}
    seed_s = None if "interpreter" in (outcome.timer or "") else outcome.tuned_seed_s  # no speed-up off a GPU
    counted = within(lineage_steps(individuals, evaluations, calls, config.get("llm") or {}, seed_s), budget)
    children = [ind for ind, _ in counted if ind.generation > 0]
    return StrategyRun(str(run_dir.relative_to(sweep_dir)) if sweep_dir else run_dir.name, outcome,
                       strategy_name(config), _get(config, ("search", "seed")), budget, len(children),
                       sum(ind.ok for ind in children), depth_reached(children),
                       best_so_far((step for _, step in counted), [SEED_COLUMN]))


def _per_gain(spent: float, speedup: float | None) -> float | None:
    """What one unit of speed-up gained cost (None without a gain, or where nothing was spent)."""
    return spent / (speedup - 1.0) if spent and speedup is not None and speedup > 1.0 else None


@dataclass
class Row:
    """One problem and strategy over its seeds: the best speed-up's median and interval, the correct rate of the
    children (of how many), and medians of what was spent, in all and per unit of gain."""
    problem: str
    strategy: str
    seeds: int
    speedup: Interval | None
    correct_rate: float | None
    children: int
    llm_calls: float | None
    llm_cost_usd: float | None
    evaluations: float | None
    gpu_s: float | None
    calls_per_gain: float | None
    cost_per_gain: float | None
    runs_with_gain: int | None  # None on the interpreter: no speed-up is computed there
    depth: float | None  # the longest chain of children reached, median over seeds

    def to_dict(self, timer: str) -> dict:
        """For strategies.json: the evaluation seconds under the name of what they are (gpu_s on a GPU,
        interpreter_s on the CPU)."""
        row = asdict(self)
        row[seconds_key(timer)] = row.pop("gpu_s")
        return row


def summary_rows(runs: list[StrategyRun]) -> list[Row]:
    """Per problem and strategy, in the order first met."""
    groups: dict[tuple, list[StrategyRun]] = {}
    for run in runs:
        groups.setdefault((run.problem, run.strategy), []).append(run)
    rows = []
    for (problem, strategy), group in groups.items():
        ends = [run.end for run in group if run.end is not None]
        speedups = [end[SEED_COLUMN] for end in ends if end[SEED_COLUMN] is not None]
        children = sum(run.children for run in group)
        rows.append(Row(problem, strategy, len(group), median_interval(speedups, Bootstrap.default()),
                        sum(run.correct for run in group) / children if children else None, children,
                        *[median(end[unit] for end in ends) for unit in ("llm_calls", "llm_cost_usd", "evaluations",
                                                                          "gpu_s")],
                        median(_per_gain(end["llm_calls"], end[SEED_COLUMN]) for end in ends),
                        median(_per_gain(end["llm_cost_usd"], end[SEED_COLUMN]) for end in ends),
                        None if all(run.interpreter for run in group) else sum(1 for s in speedups if s > 1.0),
                        median(run.depth for run in group)))
    return rows


def seconds_key(timer: str) -> str:
    """What the evaluations' seconds are: GPU time on a GPU, the interpreter's CPU wall-clock on the CPU."""
    return "interpreter_s" if "interpreter" in (timer or "") else "gpu_s"


def header(timer: str) -> tuple:
    """The table's columns: on the CPU no speed-up (the interpreter's times say nothing of a GPU's), on a GPU the
    best speed-up, GPU time and what a unit of gain cost."""
    if "interpreter" in (timer or ""):
        return ("problem", "strategy", "seeds", "correct rate", "LLM calls", "cost (USD)", "evaluations",
                "interpreter seconds", "depth reached")
    return ("problem", "strategy", "seeds", "best speed-up", "correct rate", "LLM calls", "cost (USD)",
            "evaluations", "GPU seconds", "depth reached", "calls per gain", "cost per gain")


def _cells(r: Row, timer: str = "") -> list[str]:
    cells = {"problem": r.problem, "strategy": r.strategy, "seeds": str(r.seeds),
             "best speed-up": r.speedup.text() if r.speedup else DASH,
             "correct rate": f"{percent(r.correct_rate)} ({r.children})", "LLM calls": number(r.llm_calls, "{:g}"),
             "cost (USD)": number(r.llm_cost_usd, "{:.4f}"), "evaluations": number(r.evaluations, "{:g}"),
             "GPU seconds": number(r.gpu_s, "{:.1f}"), "interpreter seconds": number(r.gpu_s, "{:.1f}"),
             "depth reached": number(r.depth, "{:g}"), "calls per gain": number(r.calls_per_gain, "{:.3g}"),
             "cost per gain": number(r.cost_per_gain, "{:.4f}")}
    return [cells[column] for column in header(timer)]


def selection_text(ranked: str, timer: str) -> str:
    """What the runs ranked their parents, the tree's nodes and their best kernel by (``RunOutcome.ranked_by``)."""
    return f"Ranked by (parents, the tree's nodes, the best kernel): {ranked or 'not recorded'}."


def caption(budget: dict, timer: str, selection: str = "") -> str:
    budget_text = ", ".join(f"{unit.removeprefix('llm_')} {limit:g}" for unit, limit in budget.items()) \
        or "search.generations only"
    counted = ("Correct rate: of every child (how many), those that made no kernel included. LLM calls: every call "
               "of the run, replays from the cache included. Depth reached: the longest chain of children, each made "
               "from the one before (median over seeds).")
    if "interpreter" in (timer or ""):
        return (f"Budget per run: {budget_text}. On the CPU ({timer}; interpreter wall-clock, not GPU figures): no "
                f"speed-up, no cost per gain and no anytime curve -- the interpreter's times say nothing of a GPU's; "
                f"correctness, calls, children and depth compare the strategies. {selection_text(selection, timer)} "
                f"{counted}")
    return (f"Budget per run: {budget_text}. Speed-up: the best kernel's time over the tuned seed's ({timer or '?'}); "
            f"median over seeds [{Bootstrap.default().describe()} interval; none for one seed]. GPU seconds: the "
            f"evaluations' own GPU time. {selection_text(selection, timer)} {counted} Per gain: spent / (speed-up - "
            f"1), median over the runs that gained.")


def markdown(rows: list[Row], budget: dict, timer: str, selection: str = "") -> str:
    columns = header(timer)
    lines = [caption(budget, timer, selection), "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cells(r, timer)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def curves_png(runs: list[StrategyRun], problem: str) -> bytes:
    """Best speed-up vs LLM calls (evaluations when no call was made) and vs evaluation seconds, side by side: a
    line per run, coloured by strategy."""
    mine = [run for run in runs if run.problem == problem]
    first = ("llm_calls", "LLM calls") if any(run.end and run.end["llm_calls"] for run in mine) else \
        ("evaluations", "evaluations")
    return plot([(run.strategy, run.curve) for run in mine], problem, [first, (GPU_AXIS[0], "evaluation seconds")],
                ylabel="best speed-up over the tuned seed")


def write_strategies_report(sweep_dir: Path) -> Path | None:
    """strategies.md, .json and .html in the sweep directory (None when it holds no finished run); the table
    printed. A run with no summary.json (killed, or still running) is left out, and named."""
    from evo.benchmark.multirun import run_dirs
    from evo.runs.failure import RunFailure
    from evo.reports.page import Raw, esc, page, png_img, table

    named = {d: str(d.relative_to(sweep_dir)) for d in run_dirs(sweep_dir)}
    failed = {named[d]: found.message for d in named if (found := RunFailure.kept(d))}  # a job's error: its own row
    finished = [d for d in named if (d / SUMMARY_FILE).is_file() and named[d] not in failed]
    unfinished = [named[d] for d in named if d not in finished and named[d] not in failed]
    runs = [run_record(d, sweep_dir) for d in finished]
    if not runs:
        return None
    budgets = {json.dumps(run.budget, sort_keys=True) for run in runs}
    budget = runs[0].budget if len(budgets) == 1 else {}
    timer = ",".join(sorted({run.outcome.timer for run in runs if run.outcome.timer}))
    selection = "; ".join(sorted({run.outcome.ranked_by for run in runs if run.outcome.ranked_by}))
    rows = summary_rows(runs)
    text = markdown(rows, budget, timer, selection)
    warnings = ([] if len(budgets) == 1 else [f"The runs do not share one budget ({' / '.join(sorted(budgets))}): "
                                               f"not an equal-budget comparison."]) + \
        ([f"Left out, with no {SUMMARY_FILE} (the run did not finish): {', '.join(unfinished)}."] if unfinished else [])
    warnings += [f"Failed (the job's error; the sweep ran the others): {run}: {why}" for run, why in failed.items()]
    text = "".join(f"**{warning}**\n\n" for warning in warnings) + text
    (sweep_dir / f"{STEM}.md").write_text(text)
    (sweep_dir / f"{STEM}.json").write_text(json.dumps({"budget": budget, "timer": timer,
                                                        "ranked_by": selection,
                                                        "speedups": "interpreter" not in timer,
                                                        "unfinished": unfinished, "failed": failed,
                                                        "rows": [row.to_dict(timer) for row in rows],
                                                        "runs": [run.to_dict() for run in runs]}, indent=1) + "\n")
    head = "".join(f"<p><b>{esc(warning)}</b></p>" for warning in warnings) + \
        f"<p class='note'>{esc(caption(budget, timer, selection))}</p>"
    sections = [(None, Raw(head + table(header(timer), [_cells(row, timer) for row in rows])))]
    if "interpreter" not in timer:  # the curves are of speed-ups: none off a GPU
        sections += [(f"Anytime curves: {problem}", png_img(curves_png(runs, problem), problem))
                     for problem in dict.fromkeys(run.problem for run in runs)]
    html = sweep_dir / f"{STEM}.html"
    html.write_text(page(f"kernelevo strategies: {len(runs)} runs", sections))
    print(text, flush=True)
    return html


if __name__ == "__main__":  # python -m evo.benchmark.strategies_report SWEEP_DIR: the table again from the run stores
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m evo.benchmark.strategies_report SWEEP_DIR")
    print(write_strategies_report(Path(sys.argv[1]).resolve()) or f"{sys.argv[1]}: no run stores under it")
