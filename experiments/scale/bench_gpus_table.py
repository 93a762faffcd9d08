"""Issue 45's bench table from what `experiments/scale/bench_gpus.sh` left under its $OUT: per phase the bench's wall
time and, per problem, its wall time against the search budget (the row's `wall_s`, the search's own
`search_wall_s` and how far it ran past its budget, and the baselines' and seed's seconds, which the caches should
bring to about nothing; whether the seed was cached or captured and why; the first seed's verdict and the compiler
seeds' TF32 check, part of the search's time).
    python3 experiments/scale/bench_gpus_table.py OUT_DIR > table.md"""
import json
import re
import sys
from pathlib import Path


def rows(bench: Path) -> list:
    return [json.loads(p.read_text()) for p in sorted((bench / "rows").glob("*.json"))]


def main(out: Path) -> None:
    phases = {m.group(1): (m.group(2), float(m.group(4))) for m in
              re.finditer(r"(\S+) gpus=(\S+) rc=(\d+) wall_s=([\d.]+)", (out / "phases.txt").read_text())}
    budget = re.search(r"SEARCH_S=(\d+)", (out / "machine.txt").read_text())
    budget = float(budget.group(1)) if budget else float("nan")
    print((out / "machine.txt").read_text().strip().replace("\n", "; "), "\n")
    print("| phase | GPUs | bench wall (s) | problems | ok | max problem wall - budget (s) |")
    print("|---|---|---|---|---|---|")
    for phase, (gpus, wall) in phases.items():
        got = rows(out / phase / "bench")
        over = max((r.get("wall_s", 0) - budget for r in got), default=float("nan")) if phase != "warm" else None
        print(f"| {phase} | {gpus} | {wall:.1f} | {len(got)} | {sum(r.get('status') == 'ok' for r in got)} | "
              f"{'-' if over is None else f'{over:+.1f}'} |")
    if "bench1" in phases and "benchN" in phases:
        print(f"\nN-GPU bench / 1-GPU bench wall time: {phases['benchN'][1] / phases['bench1'][1]:.3f}")
    for phase in ("bench1", "benchN"):
        if phase not in phases:
            continue
        print(f"\n## {phase}\n\n| problem | status | wall (s) | search (s) | past its budget (s) | baselines (s) "
              "| seed (s) | seed | seed judged and TF32 check, in the search (s) | evaluations | before the search, by stage (s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows(out / phase / "bench"):
            s = r.get("summary") or {}
            f = {k: s.get(k) for k in ("search_wall_s", "over_budget_s", "baseline_wall_s", "seed_wall_s")}
            check = s.get("seed_check_s")
            print(f"| {r['name']} | {r.get('status')} | {r.get('wall_s', 0):.1f} | "
                  + " | ".join("-" if v is None else f"{v:.1f}" for v in f.values())
                  + f" | {s.get('seed_cache') or '-'} | {'-' if check is None else f'{check:.1f}'} "
                  + f"| {s.get('evaluations', '-')} | "
                  + ", ".join(f"{k} {v}" for k, v in (s.get("start_up_s") or {}).items()) + " |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
