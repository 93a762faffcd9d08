"""One table of dev-20 searches from bench rows gathered from several device calls (issue 24's figure): per problem
evaluations/hour, search wall time, GPU busy, timeouts and speed-ups against every baseline measured; the median
and minimum evaluations/hour over the problems with a search, and the problems of the list not run.

    python3 experiments/scale/dev20_table.py ROWS_DIR DEV20_LIST > TABLE.md
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from evo.benchmark.bench import Row  # noqa: E402
from fitness.common.formatting import number, percent, speedup  # noqa: E402


def table(rows_dir: Path, listed: list[str]) -> str:
    saved = {p: json.loads(p.read_text()) for p in sorted(rows_dir.glob("*.json"))}
    rows = {r["name"]: (Row.from_dict({k: v for k, v in r.items() if k != "measured_at"}, str(p)),
                        r.get("measured_at", "memory slots")) for p, r in saved.items()}
    lines = ["| problem | status | evaluations | evals/h | search (s) | GPU busy | timeouts | vs eager | vs compile "
             "| vs max-autotune | vs best (which) | measured at |", "|" + "---|" * 12]
    rates = []
    for name in listed:
        if name not in rows:
            lines.append(f"| {name} | not run | | | | | | | | | | |")
            continue
        r, measured_at = rows[name]
        s = r.summary
        if r.status == "ok" and s.evaluations_per_hour:
            rates.append(s.evaluations_per_hour)
        lines.append(" | ".join([
            f"| {name}", r.status, number(s.evaluations, "{}"), number(s.evaluations_per_hour or None),
            number(s.search_wall_s or None), percent(s.gpu_busy or None),
            number(s.timeouts if s.evaluations is not None else None, "{}"), speedup(s.speedup_vs_eager),
            speedup(s.speedup_vs_compile), speedup(s.speedup_vs_max_autotune),
            f"{speedup(s.speedup_vs_best)} ({s.best_baseline})" if s.best_baseline else "-", measured_at + " |"]))
    lines += ["", f"Problems with a search: {len(rates)} of {len(listed)}; evaluations/hour median "
                  f"{statistics.median(rates):,.0f}, min {min(rates):,.0f}, max {max(rates):,.0f}."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    listing = [line.strip() for line in Path(sys.argv[2]).read_text().splitlines() if line.strip()]
    print(table(Path(sys.argv[1]), listing), end="")
