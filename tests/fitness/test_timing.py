"""Timer statistics, the unseen-stream check and the timers' calls (the GPU timer on fake CUDA events here; on a GPU by
experiments/)."""
from fitness.measure.timing import (TimingStats, WallClockTimer, fastest_baselines, repetition_times, settled_baselines,
                            unseen_stream_work)


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


def test_a_repetition_counts_the_device_wide_time_only_when_another_stream_ran_clearly_past_the_end():
    # an H100's device-wide estimate moves by about +-5 us with host scheduling around a 49 us kernel: that noise
    # must not become the kernel's time; work left running on another stream (30 us and more past the end) must
    stream = [49e-6, 49e-6, 49e-6, 49e-6, 400e-6]
    device_wide = [44e-6, 54e-6, 58e-6, 80e-6, 435e-6]
    assert repetition_times(stream, device_wide) == [49e-6, 49e-6, 49e-6, 80e-6, 400e-6]
    assert repetition_times([400e-6], [441e-6]) == [441e-6]  # beyond 10 % of a long kernel: counted


class ScriptedTimer:
    """Answers each measure() with the next median from a script, recording which model it timed."""

    def __init__(self, medians):
        self.medians, self.timed = list(medians), []

    def measure(self, model, inputs):
        self.timed.append(model)
        return TimingStats.from_samples("cuda-events", [self.medians.pop(0)] * 3)


def test_baselines_are_timed_twice_and_a_cold_first_reading_is_dropped_and_said():
    timer = ScriptedTimer([137e-6, 132e-6, 116e-6, 69e-6])  # a cold GPU's first round, then the settled one
    kept, notes = settled_baselines(timer, {"eager": "E", "compile": "C"}, [[1]])
    assert timer.timed == ["E", "C", "E", "C"]  # every model in each round
    assert kept["eager"]["median_s"] == 116e-6 and kept["compile"]["median_s"] == 69e-6
    assert len(notes) == 2 and "compile: its first timing read 91% slower" in notes[1]
    steady, quiet = settled_baselines(ScriptedTimer([100e-6, 101e-6]), {"eager": "E"}, [[1]])
    assert steady["eager"]["median_s"] == 101e-6 and quiet == []  # within the tolerance: nothing to say


def test_of_baselines_from_several_processes_the_fastest_of_each_is_kept_and_a_slow_process_said():
    """A freshly started GPU's first process read layernorm at 136/131 us where later ones read 116/69 us."""
    stats = lambda median: {"timer": "cuda-events", "n": 10, "median_s": median, "mean_s": median, "min_s": median}
    first = {"eager": stats(136e-6), "compile": stats(131e-6)}
    second = {"eager": stats(116e-6), "compile": stats(69e-6)}
    kept, notes = fastest_baselines([first, second])
    assert kept == second
    assert notes == ["baseline compile: process 1 of 2 read 90% slower than the one kept (a GPU's first processes "
                     "can run slow)", "baseline eager: process 1 of 2 read 17% slower than the one kept (a GPU's "
                     "first processes can run slow)"]
    kept, notes = fastest_baselines([second, {"eager": stats(117e-6), "compile": None}])
    assert kept == second and notes == []  # within the tolerance; a model one process could not time is skipped
    assert fastest_baselines([]) == ({}, [])


class FakeEvent:
    """A CUDA event on the host clock (no GPU here): record() stamps time.perf_counter()."""

    def __init__(self, enable_timing=True):
        self.at = 0.0

    def record(self):
        import time

        self.at = time.perf_counter()

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


class CountingFeed:
    """A feed that numbers its calls and records what done() was given after each."""

    def __init__(self):
        self.given, self.returned, self.measured = 0, [], None

    def __len__(self):
        return 1

    def begin(self, calls):
        self.measured = calls

    def next(self):
        self.given += 1
        return [self.given]

    def done(self, output):
        self.returned.append(output)


def test_the_gpu_timer_hands_the_feed_what_each_call_returned_after_the_call(monkeypatch):
    import fitness.measure.timing as timing

    monkeypatch.setattr(timing, "_cuda_event", FakeEvent)
    monkeypatch.setattr(timing, "_event_record", FakeEvent.record)
    monkeypatch.setattr(timing, "_event_elapsed", FakeEvent.elapsed_time)
    monkeypatch.setattr(timing, "_cuda_synchronize", lambda: None)
    monkeypatch.setattr(timing, "_cuda_sleep", lambda cycles: None)
    monkeypatch.setattr(timing.CudaEventTimer, "_spin_rate", lambda self: 1e9)
    timer = timing.CudaEventTimer(warmup_ms=1.0, rep_ms=1.0, min_reps=5, max_reps=5, l2_bytes=0, flush_l2=False)
    feed = CountingFeed()
    stats = timer.measure(lambda i: ("out", i), feed)
    assert stats.n == 5 and feed.measured == 5
    assert feed.returned == [("out", i) for i in range(1, feed.given + 1)]  # every call's own output, in order
