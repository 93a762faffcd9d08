"""Which seed each best kernel of a bench came from (issue: compiler seeds): per run of a bench directory, the
generation-0 kernels (the seed and Inductor's variants) with their tuned times, and the run's best kernel with the
seeds it descends from (``summary.json``'s ``best_from``, every parent followed).

    python3 experiments/seed_lineage.py BENCH_DIR [--out TABLE.md]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from fitness.common.formatting import microseconds  # noqa: E402


def lineage_rows(bench_dir: Path) -> list[list[str]]:
    from evo.reports.outcome import summarise
    from evo.records.store import RunStore

    rows = []
    for run_dir in sorted((bench_dir / "runs").iterdir()):
        if not (run_dir / "run.db").is_file():
            continue
        store = RunStore(run_dir)
        try:
            individuals = store.individuals()
            if not individuals:
                continue
            first = sorted((i for i in individuals if i.generation == 0), key=lambda i: i.id)
            summary = summarise(store, store.latest_checkpoint())  # the run's own best, as its summary.json
            best = store.individual(summary.best_id) if summary.best_id else None
            seeds = ", ".join(f"{i.operator} {_us(i)}" for i in first)
            rows.append([run_dir.name, seeds, _us(best) if best else "-", summary.best_from or "-"])
        finally:
            store.close()
    return rows


def _us(ind) -> str:
    return f"{microseconds(ind.result.time_s)} us" if ind.result.ok else ind.result.status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_dir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = ["| run | generation 0 (tuned) | best | best descends from |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in lineage_rows(args.bench_dir)]
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")


if __name__ == "__main__":
    main()
