"""Where a search's wall time went on the GPU: its evaluations laid on one timeline from their spans (``spans`` of
each result: [stage, wall start, wall end], the evaluator's `evaluation` and its worker's stages).

Each instant of the window is in exactly one state, first match wins:

* ``timing``: a worker holds the GPU alone (timing, or a profiling run);
* ``drain``: workers hold the GPU shared (setup, correctness trials, checking timed outputs, warming the judge,
  creating a CUDA context when that holds the lock) while a timer waits for them to finish;
* ``shared``: workers hold the GPU shared, no timer waiting;
* ``gpu_free``: evaluations are in flight but none holds the GPU (they start, compile, or wait for a lock);
* ``no_evaluation``: nothing is being evaluated (the search varies, selects, checkpoints, or waits on a barrier).

The fractions sum to 1; ``in_flight_mean`` is the mean number of evaluations in flight; ``held_by`` splits drain and
shared among the stages holding the GPU then (an instant held by two stages counts half to each); ``idle_gaps`` (of a
run) lists the spells with nothing in flight.

    python3 experiments/timeline.py RUN_DIR [RUN_DIR ...]     # a run's timeline, from its run store
"""
from __future__ import annotations

import json
import sys
from collections import Counter
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


START_UP = frozenset({"cuda_init", "warm_judge"})


def gpu_timeline(results, start: float, end: float, start_up_under_lock: bool | str = True) -> dict:
    """The share of [start, end] in each state (STATES) and the mean evaluations in flight. A worker's start-up
    (context creation, judge warm-up) counts as holding the GPU shared only when it does
    (``fitness.start_up_under_lock``; "context only": the judge's warm-up did, not the context)."""
    wall = end - start
    if wall <= 0:
        return {}
    shared = (SHARED if start_up_under_lock is True else
              SHARED - {"cuda_init"} if start_up_under_lock == "context only" else SHARED - START_UP)
    events = []  # (time, kind, +1/-1, stage)
    for name, s, e in _spans(results):
        s, e = max(s, start), min(e, end)
        if e <= s:
            continue
        kind = ("timing" if name in EXCLUSIVE else "shared" if name in shared else
                "evaluation" if name == "evaluation" else "waiting" if name == "wait_exclusive" else None)
        if kind:
            events += [(s, kind, 1, name), (e, kind, -1, name)]
    events.sort(key=lambda ev: (ev[0], ev[2]))  # ends before starts at the same instant
    counts = {"timing": 0, "shared": 0, "evaluation": 0, "waiting": 0}
    holders = Counter()  # the stages holding the GPU shared now
    shares, held_by = dict.fromkeys(STATES, 0.0), Counter()
    in_flight, last = 0.0, start
    for t, kind, delta, name in [*events, (end, None, 0, None)]:
        if t > last:
            state = ("timing" if counts["timing"] else
                     ("drain" if counts["waiting"] else "shared") if counts["shared"] else
                     "gpu_free" if counts["evaluation"] else "no_evaluation")
            shares[state] += t - last
            if state in ("drain", "shared"):
                for holder in (held := [h for h, n in holders.items() if n > 0]):
                    held_by[holder] += (t - last) / len(held)
            in_flight += (t - last) * counts["evaluation"]
            last = t
        if kind:
            counts[kind] += delta
            if kind == "shared":
                holders[name] += delta
    return {**{k: v / wall for k, v in shares.items()}, "in_flight_mean": in_flight / wall,
            "held_by": {k: v / wall for k, v in sorted(held_by.items())}}


def idle_gaps(results) -> list[tuple[float, float]]:
    """(start, length) in seconds from the first evaluation's start, of each spell with no evaluation in flight
    between two evaluations: where the search varies, selects and checkpoints (the generation barrier)."""
    evaluations = sorted((s, e) for name, s, e in _spans(results) if name == "evaluation")
    if not evaluations:
        return []
    origin, busy_until, gaps = evaluations[0][0], evaluations[0][1], []
    for start, end in evaluations[1:]:
        if start > busy_until:
            gaps.append((round(busy_until - origin, 2), round(start - busy_until, 2)))
        busy_until = max(busy_until, end)
    return gaps


def run_timeline(run_dir: Path) -> dict:
    """The timeline of a finished run, from its store: the window from its first evaluation's start to its last
    one's end."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from evo.records.store import RunStore

    store = RunStore(Path(run_dir), create=False)
    try:
        results = list(store.evaluations().values())
        under_lock = start_up_lock_of(store)
    finally:
        store.close()
    evaluations = [s for name, *s in _spans(results) if name == "evaluation"]
    if not evaluations:
        return {}
    return {"evaluations": len(results), "start_up_under_lock": under_lock,
            **gpu_timeline(results, min(s for s, _ in evaluations), max(e for _, e in evaluations), under_lock),
            "idle_gaps": idle_gaps(results)}


def rounded(value, digits: int = 3):
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    return round(value, digits) if isinstance(value, float) else value


def start_up_lock_of(store) -> bool | str:
    """Whether a run's worker start-ups held the GPU lock: what its evaluators resolved (the store's meta), else its
    config's setting (True, or "context only" for runs made before the setting covered the judge's warm-up)."""
    resolved = store.get_meta("start_up_under_lock")
    if resolved is not None:
        return resolved
    fitness = (store.get_meta("config") or {}).get("fitness") or {}
    if "start_up_under_lock" in fitness:
        return fitness["start_up_under_lock"]
    return True if fitness.get("context_under_lock", True) else "context only"


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(path, json.dumps(rounded(run_timeline(Path(path)))))
