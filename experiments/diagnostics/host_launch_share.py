"""How long the host takes to issue one call, against the call's measured time, for the best kernel of each run of
one or more bench directories and for its baselines (CPU only: it reads the run stores).

The judge's timer (``fitness.measure.timing.CudaEventTimer``) parks the GPU in a spin before each timed call, sized to
hide the host's launch of it, at most ``MAX_SPIN_S`` (5 ms), for the candidate and the baselines alike; its warm-up
records the host's time to issue one call (``launch_s``: from the call to its return, the GPU idle before it). Where
that exceeds the measured time, the GPU waited on the host, or the host on the GPU (a full launch queue, a
synchronisation inside the call): level3/34's 1,024 launches took the host 20.3 ms for a 17.0 ms time, whose GPU
work alone is 3.1 ms (``launch_bound.py``, experiments/results/kernelbench_part10/)::

    python3 experiments/diagnostics/host_launch_share.py BENCH_DIR [BENCH_DIR ...] [--over 1.3]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo.records.store import RunStore, StoreError  # noqa: E402


def best_timing(run_dir: Path) -> dict | None:
    """The timing record of the fastest correct evaluation of a run (None: none, or no readable run there)."""
    try:
        store = RunStore(run_dir, create=False)
    except StoreError:
        return None
    try:
        correct = [r for r in store.evaluations().values() if r.ok and r.time_s]
    finally:
        store.close()
    return min(correct, key=lambda r: r.time_s).timing if correct else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bench_dirs", nargs="+")
    parser.add_argument("--over", type=float, default=1.3, help="list runs whose launch / time is at least this")
    args = parser.parse_args()
    for db in (p for d in args.bench_dirs for p in sorted(Path(d, "runs").glob("*/run.db"))):
        timing = best_timing(db.parent) or {}
        best = timing.get("candidate") or {}
        if not best.get("median_s") or best.get("launch_s", 0) < args.over * best["median_s"]:
            continue
        others = ", ".join(f"{name} {t['median_s'] * 1e3:.3f} / {t.get('launch_s', 0) * 1e3:.3f} ms"
                           for name, t in timing.items() if name != "candidate")
        print(f"{db.parents[2].name}/{db.parent.name}: best {best['median_s'] * 1e3:.3f} ms measured / {best['launch_s'] * 1e3:.3f} ms "
              f"to launch ({best['launch_s'] / best['median_s']:.2f}); {others}")


if __name__ == "__main__":
    main()
