"""Timer statistics and the unseen-stream check (the GPU timer itself is exercised by experiments/)."""
from fitness.timing import TimingStats, WallClockTimer, unseen_stream_work


def test_stats_median_quartiles_and_spread():
    stats = TimingStats.from_samples("t", [1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.median_s == 3.0 and stats.min_s == 1.0 and stats.max_s == 100.0
    assert stats.p25_s <= stats.median_s <= stats.p75_s
    assert stats.spread == (stats.p75_s - stats.p25_s) / 3.0
    assert TimingStats.from_dict(stats.to_dict()) == stats


def test_work_the_events_did_not_see_is_flagged():
    honest = TimingStats.from_samples("cuda-events", [1e-3] * 5, [1e-3] * 5, [1.003e-3] * 5)
    hidden = TimingStats.from_samples("cuda-events", [1e-3] * 5, [20e-6] * 5, [1e-3] * 5)
    assert not unseen_stream_work(honest)
    assert unseen_stream_work(hidden)


def test_wall_clock_timer_runs_warmup_then_reps_rotating_inputs():
    seen = []
    stats = WallClockTimer(reps=4, warmup_calls=1).measure(seen.append, [["a"], ["b"]])
    assert seen == ["a", "a", "b", "a", "b"] and stats.n == 4 and stats.timer == "interpreter"
