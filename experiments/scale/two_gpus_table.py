"""The table of experiments/scale/two_gpus.sh's phases: wall time, evaluations per hour, GPU busy per GPU, and the
2-GPU/1-GPU ratios (issue 29).

    python3 experiments/scale/two_gpus_table.py experiments/results/two_gpus_h200

Each phase folder holds wall.txt (start, end, exit code), smi.csv (nvidia-smi every 0.5 s: time, GPU index,
utilization %, memory MiB) and either a bench's rows/ or a run's summary.json. GPU busy is nvidia-smi's utilization
(the share of each sample's period in which a kernel ran) averaged over the phase; the bench's evaluations per hour
is every row's evaluations over the bench's wall time; a search's is its own (evaluations over its search window).
"""
from __future__ import annotations

import csv
import json
import statistics
import sys
from pathlib import Path

PHASES = {  # folder: (what, GPUs, backend)
    "bench1": ("bench", 1, "local"), "bench2": ("bench", 2, "local"), "benchray": ("bench", 2, "bench/backend=ray"),
    "search1": ("search", 1, "local"), "searchray1": ("search", 1, "fitness/backend=ray"),
    "searchray2": ("search", 2, "fitness/backend=ray"),
}


def busy(folder: Path) -> dict[str, tuple[float, float, float]]:
    """Per GPU index: mean utilization %, the share of samples above 0, and the peak memory used (GiB)."""
    samples: dict[str, list[tuple[float, float]]] = {}
    with open(folder / "smi.csv") as f:
        for row in csv.reader(f):
            if len(row) >= 4:
                samples.setdefault(row[1].strip(), []).append((float(row[2]), float(row[3])))
    return {gpu: (statistics.mean(u for u, _ in v), sum(u > 0 for u, _ in v) / len(v), max(m for _, m in v) / 1024)
            for gpu, v in sorted(samples.items())}


def phase(folder: Path) -> dict:
    what, gpus, backend = PHASES[folder.name]
    t0, t1, rc = (folder / "wall.txt").read_text().split()
    out = {"phase": folder.name, "what": what, "gpus": gpus, "backend": backend, "wall_s": float(t1) - float(t0),
           "rc": int(rc), "busy": busy(folder)}
    if what == "bench":
        rows = [json.loads(p.read_text()) for p in sorted((folder / "rows").glob("*.json"))]
        evals = sum(r["summary"]["evaluations"] for r in rows if r.get("summary"))
        per_gpu: dict[str, float] = {}
        for r in rows:
            per_gpu[r["gpu"] or "unrecorded"] = per_gpu.get(r["gpu"] or "unrecorded", 0.0) + r["wall_s"]
        out.update(evaluations=evals, rate=evals / out["wall_s"] * 3600, runs_s=sum(r["wall_s"] for r in rows),
                   per_gpu_s=per_gpu)
    else:
        s = json.loads((folder / "summary.json").read_text())
        out.update(evaluations=s["evaluations"], rate=s["evaluations_per_hour"])
    return out


def table(root: Path) -> str:
    got = {p.name: phase(p) for p in sorted(root.iterdir()) if p.name in PHASES and (p / "wall.txt").is_file()}
    lines = ["| phase | GPUs | backend | wall s | evaluations | evaluations/hour | GPU busy: mean % (share of samples "
             "> 0), per GPU | peak memory GiB, per GPU | runs' own wall s, summed (per GPU) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in got.values():
        gpu_busy = ", ".join(f"GPU {g}: {m:.0f} % ({share:.0%})" for g, (m, share, _) in p["busy"].items())
        peak = ", ".join(f"{gib:.1f}" for _, _, gib in p["busy"].values())
        runs = ""
        if p["what"] == "bench":
            per_gpu = ", ".join(f"GPU {g}: {s:.0f}" for g, s in sorted(p["per_gpu_s"].items()))
            runs = f"{p['runs_s']:.0f} ({per_gpu})"
        name = p["phase"] if p["rc"] == 0 else f"{p['phase']} (exit code {p['rc']}: failed)"
        lines.append(f"| {name} | {p['gpus']} | {p['backend']} | {p['wall_s']:.1f} | {p['evaluations']} | "
                     f"{p['rate']:,.0f} | {gpu_busy} | {peak} | {runs} |")
    ratios = []
    for two, one, target, key in [("bench2", "bench1", 1.8, "wall"), ("benchray", "bench1", 1.8, "wall"),
                                  ("bench2", "bench1", 1.8, "rate"), ("benchray", "bench1", 1.8, "rate"),
                                  ("searchray2", "searchray1", 1.7, "rate")]:
        if two in got and one in got:
            r = (got[one]["wall_s"] / got[two]["wall_s"] if key == "wall" else got[two]["rate"] / got[one]["rate"])
            what = "wall time, 1 GPU / 2 GPUs" if key == "wall" else "evaluations per hour, 2 GPUs / 1 GPU"
            ratios.append(f"- {two} against {one} ({what}): **{r:.2f}x** (target {target}x: "
                          f"{'met' if r >= target else 'missed'})")
    return "\n".join(lines + [""] + ratios) + "\n"


if __name__ == "__main__":
    print(table(Path(sys.argv[1])), end="")
