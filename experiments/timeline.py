"""Where a search's wall time went on the GPU: its evaluations laid on one timeline from their spans (``spans`` of
each result: [stage, wall start, wall end], the evaluator's `evaluation` and its worker's stages).

Each instant of the window is in exactly one state, first match wins:

* ``timing``: a worker holds the GPU alone (timing, or a profiling run);
* ``shared``: a worker holds the GPU shared (setup, correctness trials, checking timed outputs, creating a CUDA
  context, warming the judge), none timing;
* ``gpu_free``: evaluations are in flight but none holds the GPU (they start, compile, or wait for a lock);
* ``no_evaluation``: nothing is being evaluated (the search varies, selects, checkpoints, or waits on a barrier).

The fractions sum to 1. ``in_flight_mean`` is the mean number of evaluations in flight; ``waiting_for_timer`` the
share of the window in which some worker waited for the exclusive lock.
"""
from __future__ import annotations

EXCLUSIVE = frozenset({"timing", "profile"})
SHARED = frozenset({"setup", "trials", "verify_timed", "cuda_init", "warm_judge"})
STATES = ("timing", "shared", "gpu_free", "no_evaluation")


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


def gpu_timeline(results, start: float, end: float) -> dict:
    """The share of [start, end] in each state (STATES), the mean evaluations in flight, and the share of time
    some worker waited for the exclusive lock."""
    wall = end - start
    if wall <= 0:
        return {}
    events = []  # (time, kind, +1/-1)
    for name, s, e in _spans(results):
        s, e = max(s, start), min(e, end)
        if e <= s:
            continue
        kind = ("timing" if name in EXCLUSIVE else "shared" if name in SHARED else
                "evaluation" if name == "evaluation" else "waiting" if name == "wait_exclusive" else None)
        if kind:
            events += [(s, kind, 1), (e, kind, -1)]
    events.sort(key=lambda ev: (ev[0], ev[2]))  # ends before starts at the same instant
    counts = {"timing": 0, "shared": 0, "evaluation": 0, "waiting": 0}
    shares = dict.fromkeys(STATES, 0.0)
    in_flight = waiting = 0.0
    last = start
    for t, kind, delta in [*events, (end, None, 0)]:
        span = t - last
        if span > 0:
            state = ("timing" if counts["timing"] else "shared" if counts["shared"] else
                     "gpu_free" if counts["evaluation"] else "no_evaluation")
            shares[state] += span
            in_flight += span * counts["evaluation"]
            waiting += span if counts["waiting"] else 0.0
            last = t
        if kind:
            counts[kind] += delta
    return {**{k: v / wall for k, v in shares.items()}, "in_flight_mean": in_flight / wall,
            "waiting_for_timer": waiting / wall}
