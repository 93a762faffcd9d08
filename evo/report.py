"""`kernelevo report`: a markdown report of a run, from its store alone.

It holds the summary table (best kernel against its seed, eager and torch.compile, speed-of-light fraction,
precision policy), best and median fitness per generation (table and plot), the lineage of the best kernel
(each ancestor, the operator that made it and its time), the sizes of the LLM agents' prompts per role and
what profiler feedback cost, the statuses of every evaluation, and the best kernel's source.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from evo.run import summarise
from evo.store import RunStore
from fitness.individual import Individual

REPORT_FILE = "report.md"
PLOT_FILE = "fitness.png"


def _ms(seconds) -> str:
    return "–" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.4f}"


def plot_fitness(logbook: list[dict], path: Path) -> bool:
    """Best and median time per generation; False when matplotlib is unavailable."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    gens = [row["gen"] for row in logbook]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, style in (("best", "o-"), ("median", "s--")):
        values = [row[key] * 1e3 if math.isfinite(row[key]) else float("nan") for row in logbook]
        ax.plot(gens, values, style, label=key)
    ax.set_xlabel("generation")
    ax.set_ylabel("kernel time (ms)")
    ax.set_title("fitness per generation (lower is better)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def lineage(store: RunStore, individual_id: str) -> list[Individual]:
    """The chain from an individual back to the seed, following first parents (ids are unique, so it ends)."""
    by_id = {ind.id: ind for ind in store.individuals()}
    chain, current = [], by_id.get(individual_id)
    while current is not None:
        chain.append(current)
        current = by_id.get(current.parents[0]) if current.parents else None
    return chain


def prompt_size_lines(sizes: dict) -> list[str]:
    """The LLM prompts' sizes per role (``RunStore.prompt_sizes``), with their three largest parts."""
    if not sizes:
        return []
    lines = ["", "## LLM prompt sizes", "", "| role | prompts | mean chars | max chars | largest parts (mean chars) |",
             "|---|---|---|---|---|"]
    for role, size in sizes.items():
        parts = sorted(size["parts"].items(), key=lambda item: -item[1])[:3]
        lines.append(f"| {role} | {size['prompts']} | {size['mean_chars']:.0f} | {size['max_chars']} | "
                     + ", ".join(f"{part} {chars:.0f}" for part, chars in parts) + " |")
    return lines


def profiler_lines(profiles: dict) -> list[str]:
    """What profiler feedback cost (``fitness.profile``): kernels profiled and the wall time of each run."""
    timed = [p["wall_s"] for p in profiles.values() if "wall_s" in p]
    if not profiles:
        return []
    notes = sorted({p["note"] for p in profiles.values() if p.get("note")})
    return (["", "## Profiler feedback", "", f"{sum('kernels' in p for p in profiles.values())} of {len(profiles)} "
             f"kernels profiled" + (f"; {sum(timed) / len(timed):.1f} s per profiling run" if timed else "")]
            + [f"- {note}" for note in notes])


def write_report(run_dir: Path) -> Path:
    store = RunStore(run_dir, create=False)
    state = store.latest_checkpoint()
    if state is None:
        store.close()
        raise ValueError(f"{run_dir}: the run has no finished generation yet; nothing to report")
    state["stop_reason"] = store.get_meta("stop_reason", "")
    summary = summarise(store, state)
    lines = [f"# kernelevo run report: {run_dir}", "", "## Summary", "", "```", summary.table(), "```", ""]
    lines += ["## Fitness per generation", ""]
    if plot_fitness(state["logbook"], Path(run_dir) / PLOT_FILE):
        lines += [f"![best and median time per generation]({PLOT_FILE})", ""]
    lines += ["| generation | offspring | evaluations so far | best (ms) | median (ms) | correct in population |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {r['gen']} | {r['nevals']} | {r['evaluations']} | {_ms(r['best'])} | {_ms(r['median'])} | "
              f"{r['correct']} |" for r in state["logbook"]]
    if state.get("hall_of_fame"):
        lines += ["", "## Lineage of the best kernel", "", "| generation | operator | params | time (ms) |",
                  "|---|---|---|---|"]
        lines += [f"| {a.generation} | {a.operator} | `{a.genome.params}` | {_ms(a.time_s)} |"
                  for a in lineage(store, state["hall_of_fame"][0])]
    lines += prompt_size_lines(store.prompt_sizes()) + profiler_lines(store.profiles())
    statuses = Counter(r.status for r in store.evaluations().values())
    lines += ["", "## Evaluations", "", ", ".join(f"{k}: {v}" for k, v in statuses.most_common()), ""]
    if summary.best is not None:
        lines += ["## Best kernel", "", "```python", summary.best.genome.rendered().rstrip(), "```", ""]
    store.close()
    path = Path(run_dir) / REPORT_FILE
    path.write_text("\n".join(lines))
    return path
