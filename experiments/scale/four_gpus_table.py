"""The table of experiments/scale/four_gpus.sh's phases (issue 45): one search on 1 GPU and on N (through Ray, or the
local backend) --
evaluations per hour, GPU busy per GPU over the search's own window and over the whole phase, where each evaluator
actor ran, how far the search ran past its budget and how many evaluations it cut there -- and the issue's targets.

    python3 experiments/scale/four_gpus_table.py experiments/results/four_gpus_h100   # a folder of phase folders
    (the script's four_gpus.tgz unpacked: mkdir t && tar xzf four_gpus.tgz -C t)

Each phase folder holds wall.txt (start, end, exit code), smi.csv (nvidia-smi every 0.5 s: time in UTC, GPU index,
utilization %, memory MiB), log.txt and the run's summary.json. GPU busy is nvidia-smi's utilization (the share of
each sample's period in which a kernel ran) averaged over the samples inside the search's window (summary.json's
search_window: baselines, seed capture and start-up excluded), and over the whole phase; evaluations per hour is
the run's own (evaluations over its search time). Phases are named searchN (local backend, N GPUs) and searchrayN
(Ray, N actors); each of more than one GPU is compared with search1 and searchray1 against the issue's target
scaled to its GPUs (3.4x on 4: 0.85 x N).
"""
from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from two_gpus_table import busy  # noqa: E402 (the whole phase's busy, as issue 29's table has it)

PHASE = re.compile(r"search(ray)?([1-8])(w?)$")  # searchN: local backend on N GPUs; searchrayN: Ray, N actors; w:
# a staleness window of two generations
RATE_TARGET, BUSY_TARGET, OVERRUN_TARGET_S = 3.4 / 4, 60.0, 5.0  # the "done when" (3.4x on 4 GPUs, per GPU)


def kind(name: str) -> tuple[int, str] | None:
    """(GPUs, backend) of a phase folder's name; None for a folder that is no search phase."""
    found = PHASE.match(name)
    if not found:
        return None
    backend = "fitness/backend=ray" if found.group(1) else "local"
    return int(found.group(2)), backend + (", search.staleness 2 generations" if found.group(3) else "")


def window_busy(folder: Path, window: list) -> dict[str, float]:
    """Per GPU index: mean utilization % of the samples inside `window` ([start, end], time.time())."""
    samples: dict[str, list[float]] = {}
    with open(folder / "smi.csv") as f:
        for row in csv.reader(f):
            if len(row) < 4:
                continue
            at = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
            if window and window[0] <= at <= window[1]:
                samples.setdefault(row[1].strip(), []).append(float(row[2]))
    return {gpu: statistics.mean(v) for gpu, v in sorted(samples.items())}


def budget_s(summary: dict) -> float | None:
    found = re.search(r"wall-time budget of ([\d.]+) s", summary.get("stop_reason", ""))
    return float(found.group(1)) if found else None


def where(log: str) -> str:
    """Where the evaluator actors ran (the Ray start line), or the local run's device."""
    found = re.search(r"evaluator actor\(s\) on (.*?); (\d+) evaluations at once", log)
    if found:
        return f"{found.group(1)} ({found.group(2)} at once on each)"
    local = re.search(r"\[kernelevo\] problem .*?; (GPU [^;]*);", log)
    return f"local, {local.group(1)}" if local else "?"


def phase(folder: Path) -> dict:
    gpus, backend = kind(folder.name)
    t0, t1, rc = (folder / "wall.txt").read_text().split()
    out = {"phase": folder.name, "gpus": gpus, "backend": backend, "wall_s": float(t1) - float(t0), "rc": int(rc),
           "busy": busy(folder), "where": where((folder / "log.txt").read_text(errors="replace"))}
    summary_file = folder / "summary.json"
    if summary_file.is_file():
        s = json.loads(summary_file.read_text())
        out.update(evaluations=s["evaluations"], rate=s["evaluations_per_hour"] or 0.0, search_s=s["search_wall_s"],
                   budget_s=budget_s(s), cut=s.get("evaluations_cut", 0), before_s=(s.get("baseline_wall_s") or 0)
                   + (s.get("seed_wall_s") or 0), window_busy=window_busy(folder, s.get("search_window") or []))
    return out


def table(root: Path) -> str:
    got = {p.name: phase(p) for p in sorted(root.iterdir(), key=lambda p: (kind(p.name) or (0, ""), p.name))
           if kind(p.name) and (p / "wall.txt").is_file()}
    lines = ["| phase | GPUs | backend | wall s | search s (budget) | evaluations cut at the budget | baselines + "
             "seeds s | evaluations | evaluations/hour | GPU busy % in the search window, per GPU | GPU busy % over "
             "the phase (share of samples > 0) | peak memory GiB | where the evaluators ran |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in got.values():
        name = p["phase"] if p["rc"] == 0 else f"{p['phase']} (exit code {p['rc']}: failed)"
        whole = ", ".join(f"GPU {g}: {m:.0f} ({share:.0%})" for g, (m, share, _) in p["busy"].items())
        peak = ", ".join(f"{gib:.1f}" for _, _, gib in p["busy"].values())
        if "evaluations" not in p:
            lines.append(f"| {name} | {p['gpus']} | {p['backend']} | {p['wall_s']:.1f} | no summary.json | | | | | | "
                         f"{whole} | {peak} | {p['where']} |")
            continue
        inside = ", ".join(f"GPU {g}: {m:.0f}" for g, m in p["window_busy"].items()) or "no samples"
        lines.append(f"| {name} | {p['gpus']} | {p['backend']} | {p['wall_s']:.1f} | {p['search_s']:.1f} "
                     f"({p['budget_s'] or '?'}) | {p['cut']} | {p['before_s']:.1f} | {p['evaluations']} | "
                     f"{p['rate']:,.0f} | {inside} | {whole} | {peak} | {p['where']} |")
    checks = []
    for many in (p for p in got.values() if p["gpus"] > 1):
        name, n = many["phase"], many["gpus"]
        for one in ("search1", "searchray1"):
            if many.get("rate") and got.get(one, {}).get("rate"):
                r, want = many["rate"] / got[one]["rate"], RATE_TARGET * n
                like = (one == "searchray1") == many["backend"].startswith("fitness/backend=ray")
                target = f"target {want:.2f}x: {'met' if r >= want else 'missed'}" + ("; like for like" if like else "")
                checks.append(f"- {name} against {one} (evaluations per hour, {n} GPUs / 1 GPU): **{r:.2f}x** "
                              f"({target})")
        if many.get("window_busy"):
            low = ", ".join(f"GPU {g} {m:.0f} %" for g, m in many["window_busy"].items()
                            if int(g) < n and m < BUSY_TARGET)  # its own GPUs: 0..N-1 (CUDA_VISIBLE_DEVICES)
            checks.append(f"- {name}, GPU busy in the search window: every GPU >= {BUSY_TARGET:.0f} %: "
                          f"{f'missed ({low})' if low else 'met'}")
    for p in got.values():
        if p.get("budget_s"):
            over = p["search_s"] - p["budget_s"]
            checks.append(f"- {p['phase']}: ran {over:+.1f} s past its {p['budget_s']:g} s budget, {p['cut']} "
                          f"evaluations cut (target: at most {OVERRUN_TARGET_S:g} s past: "
                          f"{'met' if over <= OVERRUN_TARGET_S else 'missed'})")
    return "\n".join(lines + [""] + checks) + "\n"


if __name__ == "__main__":
    print(table(Path(sys.argv[1])), end="")
