"""How sure a bench's or a multirun's speed-ups are, over repeated search seeds (``kernelevo bench --seeds N``,
``kernelevo run --seeds N``): per problem the median speed-up over its seeds with a percentile-bootstrap confidence
interval, and over the table the geometric mean with its interval (a two-stage bootstrap: the problems resampled
with replacement, then the seeds of each problem drawn). numpy only; every interval is seeded (the same runs give
the same intervals), its confidence and resamples set in one place (``Bootstrap``, the `intervals` config).

Any speed-up column of the runs' summaries counts (``speedup_vs_<baseline>``): the columns are the keys the rows
carry, so a new baseline gets its intervals with no change here. A run with no correct kernel has no speed-up:
medians and geometric means are over the seeds that found one (the table says how many did).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kernelevo.core.errors import KernelevoError
from kernelevo.core.stats import geometric_mean, median

SPEEDUP_PREFIX = "speedup_vs_"  # a run summary's speed-up columns: speedup_vs_eager, speedup_vs_compile, ...


@dataclass
class Bootstrap:
    """The settings of every interval (``intervals.*`` of a run or bench): its confidence, bootstrap resamples and
    random seed."""
    confidence: float = 0.95  # of every interval
    resamples: int = 2000  # bootstrap resamples per interval
    seed: int = 0  # the bootstrap's own random seed: the same runs give the same intervals

    def __post_init__(self):
        if not 0 < self.confidence < 1:
            raise KernelevoError(f"intervals.confidence={self.confidence} is not a probability; give one between 0 and "
                                 f"1, e.g. intervals.confidence=0.95")
        if int(self.resamples) != self.resamples or self.resamples < 100:
            raise KernelevoError(f"intervals.resamples={self.resamples} is too few for a percentile interval; give a "
                                 f"whole number of at least 100, e.g. intervals.resamples=2000")

    @classmethod
    def default(cls) -> "Bootstrap":
        """The defaults (for a report written without a composed config)."""
        return cls()

    @property
    def percentiles(self) -> tuple[float, float]:
        tail = 50 * (1 - self.confidence)
        return tail, 100 - tail

    def describe(self) -> str:
        return f"{self.confidence:.0%} percentile bootstrap, {self.resamples} resamples, bootstrap seed {self.seed}"


@dataclass
class Interval:
    """A figure and its confidence interval; `low` and `high` are None where there is none (one value)."""
    value: float
    low: float | None
    high: float | None
    n: int  # the values it rests on

    def text(self) -> str:
        if self.low is None:
            return f"{self.value:.2f}x (one seed: no interval)"
        return f"{self.value:.2f}x [{self.low:.2f}x, {self.high:.2f}x]"


def median_interval(values, boot: Bootstrap) -> Interval | None:
    """The median of `values` with its percentile-bootstrap interval; None for no value, no interval for one."""
    values = np.asarray([v for v in values], dtype=float)
    if values.size == 0:
        return None
    middle = median(values.tolist())
    if values.size == 1:
        return Interval(middle, None, None, 1)
    rng = np.random.default_rng(boot.seed)
    medians = np.median(values[rng.integers(0, values.size, size=(boot.resamples, values.size))], axis=1)
    low, high = np.percentile(medians, boot.percentiles)
    return Interval(middle, float(low), float(high), int(values.size))


def geomean_interval(groups, boot: Bootstrap) -> Interval | None:
    """The geometric mean over problems of each problem's geometric mean over its seeds (`groups`: per problem, its
    seeds' speed-ups), with a two-stage percentile-bootstrap interval: each resample draws the problems with
    replacement and, for each problem drawn, as many of its seeds as it has, with replacement. None when no problem
    has a value; no interval when no problem has two seeds (the seeds' spread is unknown)."""
    logs = [np.log(np.asarray(g, dtype=float)) for g in groups if len(g)]
    if not logs:
        return None
    value = geometric_mean([geometric_mean(g) for g in groups if len(g)])
    count = sum(g.size for g in logs)
    if max(g.size for g in logs) < 2:
        return Interval(value, None, None, count)
    sizes = np.array([g.size for g in logs])
    table = np.full((len(logs), sizes.max()), np.nan)
    for i, g in enumerate(logs):
        table[i, :g.size] = g
    rng = np.random.default_rng(boot.seed)
    problems = rng.integers(0, len(logs), size=(boot.resamples, len(logs)))  # B x P
    drawn_sizes = sizes[problems]
    seeds = (rng.random((*problems.shape, sizes.max())) * drawn_sizes[..., None]).astype(int)  # B x P x S
    drawn = table[problems[..., None], seeds]
    used = np.arange(sizes.max()) < drawn_sizes[..., None]  # a problem of n seeds draws n of them
    per_problem = np.where(used, drawn, 0.0).sum(axis=2) / drawn_sizes
    low, high = np.exp(np.percentile(per_problem.mean(axis=1), boot.percentiles))
    return Interval(value, float(low), float(high), count)


def speedup_columns(summaries) -> list[str]:
    """The speed-up columns (``speedup_vs_*``) any of the outcomes (``evo.reports.outcome.RunOutcome``) has a figure in,
    in the order of the record."""
    summaries = list(summaries)
    columns = dict.fromkeys(key for s in summaries for key in vars(s) if key.startswith(SPEEDUP_PREFIX))
    return [c for c in columns if any(getattr(s, c) is not None for s in summaries)]


def _speedup(row, column: str) -> float | None:
    value = getattr(row.summary, column) if row.status == "ok" else None
    return value if value and value > 0 else None


def seed_summary(rows, boot: Bootstrap) -> dict:
    """The intervals of a table of rows (``evo.benchmark.bench.Row``: one per problem and search seed, rows of one
    problem sharing its name), as JSON: per problem and speed-up column the median over its seeds with its interval, and
    per column the geometric mean with its interval."""
    by_problem: dict[str, list] = {}
    for row in rows:
        by_problem.setdefault(row.name, []).append(row)
    columns = speedup_columns(row.summary for row in rows)
    problems = []
    for name, runs in by_problem.items():
        values = {c: [v for v in (_speedup(r, c) for r in runs) if v is not None] for c in columns}
        problems.append({"name": name, "seeds": [r.search_seed for r in runs],
                         "correct": sum(1 for r in runs if r.status == "ok"),
                         **{c: _dict(median_interval(values[c], boot)) for c in columns}, "values": values})
    geomean = {c: _dict(geomean_interval([p["values"][c] for p in problems], boot)) for c in columns}
    return {**asdict(boot), "seeds": max((len(p["seeds"]) for p in problems), default=0), "columns": columns,
            "problems": problems, "geomean": geomean}


def _dict(interval: Interval | None) -> dict | None:
    return asdict(interval) if interval is not None else None


def _text(interval: dict | None) -> str:
    return "-" if interval is None else Interval(**interval).text()


def label(column: str) -> str:
    """A speed-up column as a table heading: speedup_vs_compile -> vs compile."""
    return "vs " + column.removeprefix(SPEEDUP_PREFIX).replace("_", "-")


def interval_table(summary: dict) -> tuple[list[str], list[list[str]]]:
    """The per-problem table of `seed_summary`'s result: header, rows."""
    header = ["problem", "seeds correct", *[f"{label(c)}: median [interval]" for c in summary["columns"]]]
    return header, [[p["name"], f"{p['correct']} of {len(p['seeds'])}", *[_text(p[c]) for c in summary["columns"]]]
                    for p in summary["problems"]]


def interval_lines(summary: dict) -> list[str]:
    """The notes under the table: the geometric means with their intervals, and how every interval was made."""
    boot = Bootstrap(summary["confidence"], summary["resamples"], summary["seed"])
    if summary["seeds"] < 2:
        return ["one search seed per problem: no confidence interval (repeat the searches with --seeds N, N >= 2)"]
    means = [f"geometric mean {label(c)}: {_text(summary['geomean'][c])}" for c in summary["columns"]]
    return [*means,
            f"up to {summary['seeds']} search seeds per problem; medians and geometric means are over the seeds "
            f"that found a correct kernel ({boot.describe()})",
            "per problem: the interval of the median resamples that problem's seeds with replacement",
            "geometric mean: over the problems of each problem's geometric mean over its seeds; its interval "
            "resamples the problems with replacement and, for each problem drawn, its seeds with replacement "
            "(two-stage bootstrap): it holds both the choice of problems and the search's luck"]
