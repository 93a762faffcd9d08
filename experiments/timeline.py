"""Where a search's wall time went on the GPU: its evaluations laid on one timeline from their spans (``spans`` of
each result: [stage, wall start, wall end], the evaluator's `evaluation` and its worker's stages).

Each instant of the window is in exactly one state, first match wins:

* ``timing``: a worker holds the GPU alone (timing, or a profiling run);
* ``drain``: workers hold the GPU shared (setup, correctness trials, checking timed outputs, warming the judge,
  creating a CUDA context when that holds the lock) while a timer waits for them to finish;
* ``shared``: workers hold the GPU shared, no timer waiting;
* ``gpu_free``: evaluations are in flight but none holds the GPU (they start, compile, or wait for a lock);
* ``no_evaluation``: nothing is being evaluated (the search varies, selects, checkpoints, or waits on a barrier).

The fractions sum to 1; ``in_flight_mean`` is the mean number of evaluations in flight.

    python3 experiments/timeline.py RUN_DIR [RUN_DIR ...]     # a run's timeline, from its run store
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

EXCLUSIVE = frozenset({"timing", "profile"})
SHARED = frozenset({"setup", "trials", "verify_timed", "cuda_init", "warm_judge"})
STATES = ("timing", "drain", "shared", "gpu_free", "no_evaluation")


def _spans(results) -> list[tuple[str, float, float]]:
    out = []
    for result in results:
        for span in getattr(result, "spans", None) or []:
            try:
                name, start, end = str(span[0]), float(span[1]), float(span[2])
            except (TypeError, ValueError, IndexError):  # a worker's diagnostics: skip what does not parse
                continue
            if end > start:
                out.append((name, start, end))
    return out


def gpu_timeline(results, start: float, end: float, context_under_lock: bool = True) -> dict:
    """The share of [start, end] in each state (STATES) and the mean evaluations in flight. A worker's CUDA context
    creation counts as holding the GPU shared only when it does (``fitness.context_under_lock``)."""
    wall = end - start
    if wall <= 0:
        return {}
    shared = SHARED if context_under_lock else SHARED - {"cuda_init"}
    events = []  # (time, kind, +1/-1)
    for name, s, e in _spans(results):
        s, e = max(s, start), min(e, end)
        if e <= s:
            continue
        kind = ("timing" if name in EXCLUSIVE else "shared" if name in shared else
                "evaluation" if name == "evaluation" else "waiting" if name == "wait_exclusive" else None)
        if kind:
            events += [(s, kind, 1), (e, kind, -1)]
    events.sort(key=lambda ev: (ev[0], ev[2]))  # ends before starts at the same instant
    counts = {"timing": 0, "shared": 0, "evaluation": 0, "waiting": 0}
    shares = dict.fromkeys(STATES, 0.0)
    in_flight, last = 0.0, start
    for t, kind, delta in [*events, (end, None, 0)]:
        if t > last:
            state = ("timing" if counts["timing"] else
                     ("drain" if counts["waiting"] else "shared") if counts["shared"] else
                     "gpu_free" if counts["evaluation"] else "no_evaluation")
            shares[state] += t - last
            in_flight += (t - last) * counts["evaluation"]
            last = t
        if kind:
            counts[kind] += delta
    return {**{k: v / wall for k, v in shares.items()}, "in_flight_mean": in_flight / wall}


def run_timeline(run_dir: Path) -> dict:
    """The timeline of a finished run, from its store: the window from its first evaluation's start to its last
    one's end."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from evo.store import RunStore

    store = RunStore(Path(run_dir), create=False)
    try:
        results = list(store.evaluations().values())
        config = store.get_meta("config") or {}
    finally:
        store.close()
    evaluations = [s for name, *s in _spans(results) if name == "evaluation"]
    if not evaluations:
        return {}
    under_lock = (config.get("fitness") or {}).get("context_under_lock", True)
    return {"evaluations": len(results), "context_under_lock": under_lock,
            **gpu_timeline(results, min(s for s, _ in evaluations), max(e for _, e in evaluations), under_lock)}


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(path, json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                for k, v in run_timeline(Path(path)).items()}))
