"""The benchmark's timeline of a search (experiments/timeline.py): each instant in one state, timers first."""
from types import SimpleNamespace

import pytest

from experiments.timeline import STATES, gpu_timeline


def result(*spans):
    return SimpleNamespace(spans=[list(s) for s in spans])


def test_states_partition_the_window_and_timing_wins_over_shared():
    results = [result(("evaluation", 0, 6), ("trials", 1, 3), ("wait_exclusive", 3, 4), ("timing", 4, 5)),
               result(("evaluation", 2, 8), ("trials", 2.5, 4.5), ("wait_exclusive", 4.5, 5), ("timing", 5, 6)),
               result(("evaluation", 9, 10), ("bogus",), ("timing", "x", 1))]  # malformed spans are skipped
    t = gpu_timeline(results, 0, 10)
    assert sum(t[s] for s in STATES) == pytest.approx(1.0)
    assert t["timing"] == pytest.approx(0.2)         # [4, 6]
    assert t["drain"] == pytest.approx(0.1)          # [3, 4]: a trial holds the GPU, a timer waits
    assert t["shared"] == pytest.approx(0.2)         # [1, 3]; [4, 4.5] is under a timer
    assert t["gpu_free"] == pytest.approx(0.4)       # [0, 1], [6, 8], [9, 10]
    assert t["no_evaluation"] == pytest.approx(0.1)  # [8, 9]
    assert t["in_flight_mean"] == pytest.approx((6 + 6 + 1) / 10)


def test_a_start_up_outside_the_lock_does_not_hold_the_gpu():
    results = [result(("evaluation", 0, 10), ("cuda_init", 0, 4), ("warm_judge", 4, 5))]
    assert gpu_timeline(results, 0, 10)["shared"] == pytest.approx(0.5)
    assert gpu_timeline(results, 0, 10, start_up_under_lock=False)["gpu_free"] == pytest.approx(1.0)
    assert gpu_timeline(results, 0, 10, start_up_under_lock="context only")["shared"] == pytest.approx(0.1)


def test_held_by_splits_the_shared_time_among_its_holders():
    results = [result(("evaluation", 0, 10), ("warm_judge", 0, 4), ("wait_exclusive", 2, 4), ("timing", 4, 5)),
               result(("evaluation", 0, 10), ("trials", 1, 3))]
    t = gpu_timeline(results, 0, 10)
    assert t["held_by"] == pytest.approx({"warm_judge": 0.1 + 0.05 + 0.05 + 0.1, "trials": 0.05 + 0.05})
    assert t["drain"] == pytest.approx(0.2) and t["shared"] == pytest.approx(0.2)


def test_spans_are_clipped_to_the_window():
    t = gpu_timeline([result(("evaluation", -5, 15), ("timing", -1, 1))], 0, 10)
    assert t["timing"] == pytest.approx(0.1) and t["gpu_free"] == pytest.approx(0.9)
    assert gpu_timeline([], 5, 5) == {}


def test_idle_gaps_are_the_spells_with_nothing_in_flight():
    from experiments.timeline import idle_gaps

    results = [result(("evaluation", 10, 12)), result(("evaluation", 11, 13), ("trials", 11, 12)),
               result(("evaluation", 13.5, 14)), result(("evaluation", 14, 15)), result(("evaluation", 16, 17))]
    assert idle_gaps(results) == [(3.0, 0.5), (5.0, 1.0)]  # from the first start; touching evaluations leave none
    assert idle_gaps([]) == []
