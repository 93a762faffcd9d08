"""Where a bench's time went and why its problems without a correct kernel have none, from a bench directory's rows
and run stores (issue 43's whole-KernelBench bench, ``kernelbench_all.sh``):

- per level: the median seconds of each stage before the search (process start, evaluation service, baselines,
  torch.compile's capture of the seeds), of the search and of the whole problem, and each stage's share of the
  summed problem time; since 1cf54a4 the capture runs beside the baselines (its wait after them is `seeds`), and
  its own time is the last column (`-` for runs from before it was recorded);
- each problem without a correct kernel: its status, the evaluations made and cut at the budget, and the first
  line of its evaluations' most frequent reason (from its run store), or the row's reason;
- each correct kernel below FLOOR (0.97x) of its best Triton-expressible baseline (issue 43's floor);
- the correct kernels whose baselines call a library kernel (cuDNN; else cuBLAS): their speed-ups over the best
  baseline;
- the evaluations rejected for work on another stream, and how many of them were timed while another problem on
  the same GPU was measuring its baselines or capturing its seeds (the rows' stage times);
- the ten problems whose baselines took longest, with their jobs' compiles, waits for the GPU's lock and timing;
- with --smi (the bench's `nvidia-smi` samples, index, utilisation): each GPU's mean utilisation and idle share.

    .venv/bin/python experiments/scale/kernelbench_stages.py BENCH_DIR [--smi smi.csv] > stages.md
"""
import argparse
import collections
import csv
import json
import re
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
             "share: " + ", ".join(STAGES) + ", search | capture (s) |", "|---" * (len(STAGES) + 6) + "|"]
    for level, group in sorted(by_level.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        stages = {s: [r["summary"]["start_up_s"].get(s) or 0.0 for r in group] for s in STAGES}
        search = [r["summary"].get("search_wall_s") or 0.0 for r in group]
        wall = [r["wall_s"] for r in group]
        shares = [sum(v) / sum(wall) for v in [*stages.values(), search]]
        lines.append(f"| {level} | {len(group)} | " + " | ".join(f"{statistics.median(v):.1f}" for v in stages.values())
                     + f" | {statistics.median(search):.1f} | {statistics.median(wall):.1f} | "
                     + ", ".join(f"{s:.0%}" for s in shares) + f" | {capture_median(group)} |")
    return lines


def capture_median(group: list[dict]) -> str:
    """The median of torch.compile's capture on its own (summary's seed_capture_s: it runs beside the baselines,
    whose stage holds it since 1cf54a4); '-' for runs from before it was recorded."""
    known = [r["summary"]["seed_capture_s"] for r in group if r["summary"].get("seed_capture_s") is not None]
    return f"{statistics.median(known):.1f}" if known else "-"


def shortened(reason: str, keep: int = 220) -> str:
    """A long row reason as its head and its tail (what failed, then the last line a timed-out run printed)."""
    return reason if len(reason) <= keep else f"{reason[:keep // 2]} ... {reason[-keep // 2:]}"


def from_store(bench_dir: Path, name: str, read):
    """`read(store)` of problem `name`'s run store in the bench directory, closed after; None where it has none."""
    run_dir = bench_dir / RUNS / slug(name)
    if not (run_dir / "run.db").exists():
        return None
    store = RunStore(run_dir, create=False)
    try:
        return read(store)
    finally:
        store.close()


def first_reason(bench_dir: Path, name: str) -> str:
    """The most frequent first line among a run's stored evaluations' reasons ('' when none is stored)."""
    reasons = from_store(bench_dir, name, lambda store: [(r.reason or "").strip().splitlines()[0][:220]
                                                         for r in store.evaluations().values()
                                                         if r.status != "ok" and r.reason]) or []
    return collections.Counter(reasons).most_common(1)[0][0] if reasons else ""


def failure_table(rows: list[dict], bench_dir: Path) -> list[str]:
    lines = ["| problem | status | wall (s) | evaluations | cut at the budget | reason |", "|---|---|---|---|---|---|"]
    for row in rows:
        if row["status"] == "ok":
            continue
        summary = row.get("summary") or {}
        why = first_reason(bench_dir, row["name"]) or shortened(row.get("reason") or "")
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


def library_called(summary: dict) -> str | None:
    """cuDNN where a baseline calls it, else cuBLAS where one calls that, else None."""
    calls = json.dumps(summary.get("baseline_library") or {})
    return next((library for library in ("cuDNN", "cuBLAS") if library in calls), None)


def library_speedups(rows: list[dict]) -> list[str]:
    by_library = collections.defaultdict(list)
    for row in rows:
        summary = row.get("summary") or {}
        if row["status"] == "ok" and summary.get("speedup_vs_best") and library_called(summary):
            by_library[library_called(summary)].append(summary["speedup_vs_best"])
    lines = ["| baselines call | correct problems | speed-up over the best baseline: min | median | max |",
             "|---|---|---|---|---|"]
    for library in ("cuDNN", "cuBLAS"):
        found = sorted(by_library[library])
        if found:
            lines.append(f"| {library} | {len(found)} | {found[0]:.2f}x | {statistics.median(found):.2f}x | "
                         f"{found[-1]:.2f}x |")
    return lines


def stage_windows(rows: list[dict]) -> dict:
    """Per run: (its GPU, [(start, end) of its baselines and seeds stages]) from its row's times."""
    windows = {}
    for row in rows:
        summary = row.get("summary") or {}
        if not summary.get("search_window") or not summary.get("start_up_s"):
            continue
        searched, stages = summary["search_window"][0], summary["start_up_s"]
        seeds = searched - (stages.get("seeds") or 0.0)
        windows[row["name"]] = (row["gpu"], [(seeds - (stages.get("baselines") or 0.0), searched)])
    return windows


def other_stream(rows: list[dict], bench_dir: Path) -> list[str]:
    windows, rejected, beside, ratios = stage_windows(rows), [], 0, []
    for row in rows:
        for when, result in from_store(bench_dir, row["name"], RunStore.evaluation_history) or []:
            if result.status == "rejected" and (result.reason or "").startswith("the device was busy"):
                gpu = windows.get(row["name"], (row["gpu"], []))[0]
                near = [name for name, (other, spans) in windows.items() if name != row["name"] and other == gpu
                        and any(a <= when <= b for a, b in spans)]
                rejected.append(row["name"])
                beside += bool(near)
                busy, stream = re.findall(r"(\d+) us", result.reason)[:2]
                ratios.append(int(busy) / int(stream))
    spread = f" (the device busy {min(ratios):.1f}-{max(ratios):.1f}x the timed stream)" if ratios else ""
    return [f"{len(rejected)} evaluations in {len(set(rejected))} problems{spread}; {beside} of them timed while "
            f"another problem on the same GPU was measuring its baselines or capturing its seeds: "
            f"{', '.join(sorted(set(rejected)))}"]


def gpu_idle(smi: Path) -> list[str]:
    utilisation = collections.defaultdict(list)
    for record in csv.reader(smi.open()):
        if len(record) >= 3 and record[2].strip().replace(".", "", 1).isdigit():
            utilisation[record[1].strip()].append(float(record[2]))
    lines = ["| GPU | samples | mean utilisation | samples at 0 % |", "|---|---|---|---|"]
    for gpu, values in sorted(utilisation.items()):
        lines.append(f"| {gpu} | {len(values)} | {statistics.fmean(values):.0f} % | "
                     f"{sum(v == 0 for v in values) / len(values):.0%} |")
    return lines


def baseline_jobs(rows: list[dict], bench_dir: Path, longest: int = 10) -> list[str]:
    """The problems whose baselines took longest, with where their jobs' time went (the run store's meta
    ``baseline_jobs``, kept since aa65980): the compiles per baseline, the waits for the GPU's lock and the timing,
    summed over the jobs."""
    found = []
    for row in rows:
        jobs = from_store(bench_dir, row["name"], lambda store: store.get_meta("baseline_jobs")) or []
        if jobs:
            found.append((sum(job.get("wall_s", 0.0) for job in jobs), row["name"], jobs))
    if not found:
        return ["not recorded (runs made before aa65980)"]
    lines = ["| problem | jobs | wall (s) | compile (s) | wait for the GPU (s) | timing (s) | ended |",
             "|---|---|---|---|---|---|---|"]
    for wall, name, jobs in sorted(found, reverse=True)[:longest]:
        compiles = collections.Counter()
        for job in jobs:
            compiles.update(job.get("compile_s", {}))
        waits = sum(job.get("wait_shared", 0.0) + job.get("wait_exclusive", 0.0) for job in jobs)
        ended = ", ".join(sorted({job["status"] for job in jobs}))
        compile_text = ", ".join(f"{k} {v:.0f}" for k, v in compiles.items()) or "-"
        lines.append(f"| {name} | {len(jobs)} | {wall:.0f} | {compile_text} | {waits:.0f} | "
                     f"{sum(job.get('timing', 0.0) for job in jobs):.0f} | {ended} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_dir", type=Path)
    parser.add_argument("--smi", type=Path, help="the bench's nvidia-smi samples (timestamp, index, utilisation, ...)")
    args = parser.parse_args()
    rows = sorted((json.loads(p.read_text()) for p in (args.bench_dir / ROWS).glob("*.json")),
                  key=lambda r: r["name"])
    out = ["## Where the time went (median seconds per problem; share of the summed problem time)", "",
           *stage_table(rows), "", "## Problems without a correct kernel", "", *failure_table(rows, args.bench_dir),
           "", f"## Correct kernels below {FLOOR}x of the best Triton-expressible baseline", "", *below_floor(rows),
           "", "## Correct kernels whose baselines call a library kernel", "", *library_speedups(rows),
           "", "## Evaluations rejected for work on another stream", "", *other_stream(rows, args.bench_dir),
           "", "## The longest baselines, by job", "", *baseline_jobs(rows, args.bench_dir)]
    out += ["", "## The GPUs' utilisation", "", *gpu_idle(args.smi)] if args.smi else []
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
