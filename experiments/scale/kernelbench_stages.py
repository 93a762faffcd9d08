"""Where a bench's time went and why its problems without a correct kernel have none, from a bench directory's rows
and run stores (issue 43's whole-KernelBench bench, ``kernelbench_all.sh``):

- per level: the median seconds of each stage before the search (process start, evaluation service, baselines,
  torch.compile's capture of the seeds), of the search and of the whole problem, and each stage's share of the
  summed problem time;
- each problem without a correct kernel: its status, the evaluations made and cut at the budget, and the first
  line of its evaluations' most frequent reason (from its run store), or the row's reason;
- each correct kernel below FLOOR (0.97x) of its best Triton-expressible baseline (issue 43's floor).

    python3 experiments/scale/kernelbench_stages.py BENCH_DIR > stages.md
"""
import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

from evo.benchmark.bench import ROWS, RUNS, slug
from evo.records.store import RunStore
from evo.reports.outcome import RunOutcome
from fitness.measure.baselines import triton_best

STAGES = ("process", "service", "baselines", "seeds")
FLOOR = 0.97


def stage_table(rows: list[dict]) -> list[str]:
    by_level = collections.defaultdict(list)
    for row in rows:
        summary = row.get("summary") or {}
        if summary.get("start_up_s"):
            by_level[row["name"].split("/")[0]].append(row)
            by_level["all"].append(row)
    lines = ["| level | problems | " + " | ".join(f"{s} (s)" for s in STAGES) + " | search (s) | problem (s) | "
             "share: " + ", ".join(STAGES) + ", search |", "|---" * (len(STAGES) + 5) + "|"]
    for level, group in sorted(by_level.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        stages = {s: [r["summary"]["start_up_s"].get(s) or 0.0 for r in group] for s in STAGES}
        search = [r["summary"].get("search_wall_s") or 0.0 for r in group]
        wall = [r["wall_s"] for r in group]
        shares = [sum(v) / sum(wall) for v in [*stages.values(), search]]
        lines.append(f"| {level} | {len(group)} | " + " | ".join(f"{statistics.median(v):.1f}" for v in stages.values())
                     + f" | {statistics.median(search):.1f} | {statistics.median(wall):.1f} | "
                     + ", ".join(f"{s:.0%}" for s in shares) + " |")
    return lines


def first_reason(run_dir: Path) -> str:
    """The most frequent first line among a run's stored evaluations' reasons ('' when none is stored)."""
    if not (run_dir / "run.db").exists():
        return ""
    store = RunStore(run_dir, create=False)
    try:
        reasons = [(r.reason or "").strip().splitlines()[0][:220] for r in store.evaluations().values()
                   if r.status != "ok" and r.reason]
    finally:
        store.close()
    return collections.Counter(reasons).most_common(1)[0][0] if reasons else ""


def failure_table(rows: list[dict], bench_dir: Path) -> list[str]:
    lines = ["| problem | status | wall (s) | evaluations | cut at the budget | reason |", "|---|---|---|---|---|---|"]
    for row in rows:
        if row["status"] == "ok":
            continue
        summary = row.get("summary") or {}
        why = first_reason(bench_dir / RUNS / slug(row["name"])) or (row.get("reason") or "")[-220:]
        lines.append(f"| {row['name']} | {row['status']} | {row['wall_s']:.0f} | {summary.get('evaluations', '-')} | "
                     f"{summary.get('evaluations_cut', '-')} | {why.replace('|', '/')} |")
    return lines


def below_floor(rows: list[dict]) -> list[str]:
    lines = ["| problem | vs best Triton-expressible baseline | which | vs best baseline |", "|---|---|---|---|"]
    for row in rows:
        if row["status"] != "ok" or not row.get("summary"):
            continue
        outcome = RunOutcome.from_dict(row["summary"])
        found = triton_best(vars(outcome))  # (the baseline, the speed-up over it)
        if found is not None and found[1] < FLOOR:
            best = outcome.speedup_vs_best
            vs_best = "-" if best is None else f"{best:.2f}x"
            lines.append(f"| {row['name']} | {found[1]:.2f}x | {found[0]} | {vs_best} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_dir", type=Path)
    args = parser.parse_args()
    rows = sorted((json.loads(p.read_text()) for p in (args.bench_dir / ROWS).glob("*.json")),
                  key=lambda r: r["name"])
    out = ["## Where the time went (median seconds per problem; share of the summed problem time)", "",
           *stage_table(rows), "", "## Problems without a correct kernel", "", *failure_table(rows, args.bench_dir),
           "", f"## Correct kernels below {FLOOR}x of the best Triton-expressible baseline", "", *below_floor(rows)]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
