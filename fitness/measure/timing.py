"""Timers for candidates and baselines; one method for both, so their times compare.

This module binds the clock functions it uses when it is imported, which the evaluation worker does before any
candidate code is imported: later patching of ``time`` or ``torch.cuda`` attributes cannot change the timer.

* ``CudaEventTimer``, per repetition: flush L2 (a buffer twice the profile's L2), synchronise, park the GPU in a
  short spin (``torch.cuda._sleep``) sized to the call's host launch time so the launch latency is hidden (a
  repetition whose launch outlasted its spin is measured again, and the spin lengthened if that recurs), record
  a start event, call, record an end event, synchronise the whole device and record a third event. The time is
  the start-to-end event time, unless work on some other stream ran past the end event by more than the
  device-wide estimate's own noise (``DEVICE_WIDE_MARGIN``): then the device-wide time (less the measured latency
  of that last event) counts. The device-wide time goes through a host synchronisation, so it moves with host
  scheduling; taking it whenever it was the larger made the median move between evaluations of one kernel
  (docs/measurements.md). The number of repetitions is sized
  to a time budget.
* ``WallClockTimer``: for Triton's CPU interpreter; times are labelled ``interpreter`` and mean nothing on a GPU.

Both take their inputs from a feed, asked outside the timed region: ``next()`` before each call (warm-up included)
gives its inputs, ``done(output)`` after it (the call finished, the device synchronised) sees what it returned, and
``begin(calls)`` says, once the warm-up is over, how many measured calls are planned. A list of input sets is fed by
``Rotation`` (the sets in turn: the baselines). A candidate is fed by ``fitness.judge.timed_inputs.FreshInputs``: every
call gets a fresh draw of the problem's ``get_inputs()``, so no call's inputs repeat an earlier one's and a result
cached by input content never hits, and a seeded sample of the measured calls (``checked_calls``) is checked against
the reference. Its cost is outside the timed region but not free: per call one draw of the inputs (their bytes
written once by the problem's own random generators, plus ``get_inputs``' Python: tens of microseconds for a small
problem; for a memory-bound kernel about as long as the kernel itself reads them) and, on each checked call, a copy
of the inputs, the reference and the comparison. The warm-up's budget counts the draws, the time per call that sizes
the repetitions does not; the result reports the draws' and the checks' seconds (``phases_s.timed_inputs``,
``phases_s.verify_timed``).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch

from kernelevo.core.records import from_record
from fitness.settings import TimingSettings

# device-wide time counts instead of the timed stream's when it is longer by more than this (absolute s, relative)
DEVICE_WIDE_MARGIN = (10e-6, 0.10)
MAX_SPIN_S = 5e-3

_perf_counter = time.perf_counter
_cuda_event = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize
_cuda_sleep = torch.cuda._sleep
_event_record, _event_elapsed = torch.cuda.Event.record, torch.cuda.Event.elapsed_time
_zero = torch.Tensor.zero_


@dataclass
class TimingStats:
    timer: str
    n: int
    median_s: float
    mean_s: float
    min_s: float
    max_s: float
    p25_s: float
    p75_s: float
    stream_median_s: float  # the timed stream's events alone
    all_streams_median_s: float  # until every stream of the device was done
    launch_s: float = 0.0  # median host time to launch one call (warm-up)
    spin_s: float = 0.0  # the GPU spin before each repetition, sized to hide that launch (the last one used)
    redone: int = 0  # repetitions measured again because the launch outlasted the spin

    @property
    def spread(self) -> float:
        """Inter-quartile range relative to the median."""
        return (self.p75_s - self.p25_s) / self.median_s if self.median_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "spread": self.spread}

    @classmethod
    def from_samples(cls, timer: str, samples: list[float], stream: list[float] | None = None,
                     all_streams: list[float] | None = None, **extra) -> "TimingStats":
        ordered = sorted(samples)
        quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
        return cls(timer=timer, n=len(ordered), median_s=statistics.median(ordered),
                   mean_s=statistics.fmean(ordered), min_s=ordered[0], max_s=ordered[-1], p25_s=quartiles[0],
                   p75_s=quartiles[2], stream_median_s=statistics.median(stream or samples),
                   all_streams_median_s=statistics.median(all_streams or samples), **extra)

    @classmethod
    def from_dict(cls, data: dict | None) -> "TimingStats | None":
        if data is None:
            return None
        return from_record(cls, {k: v for k, v in data.items() if k != "spread"}, "a timing record")  # spread: derived


class Rotation:
    """The feed of fixed input sets, used in turn (the baselines' inputs); the measured calls start again at the
    first set."""

    def __init__(self, input_sets: list):
        if not input_sets:
            raise ValueError("a timing needs at least one input set")
        self.input_sets, self.calls = input_sets, 0

    def __len__(self) -> int:
        return len(self.input_sets)

    def begin(self, calls: int) -> None:
        self.calls = 0

    def next(self) -> list:
        self.calls += 1
        return self.input_sets[(self.calls - 1) % len(self.input_sets)]

    def done(self, output) -> None:
        return None


def as_feed(inputs):
    """A feed as it is (it has ``next``), or a list of input sets as their ``Rotation``."""
    return inputs if hasattr(inputs, "next") else Rotation(inputs)


class WallClockTimer:
    """Host wall-clock per call; for the CPU interpreter."""

    name = "interpreter"

    def __init__(self, reps: int = 3, warmup_calls: int = 1):
        self.reps = reps
        self.warmup_calls = warmup_calls

    def measure(self, fn, inputs) -> TimingStats:
        """`inputs`: a list of input sets (rotated) or a feed (module docstring)."""
        feed = as_feed(inputs)
        for _ in range(self.warmup_calls):
            feed.done(fn(*feed.next()))
        feed.begin(self.reps)
        samples = []
        for _ in range(self.reps):
            args = feed.next()
            start = _perf_counter()
            output = fn(*args)
            samples.append(_perf_counter() - start)
            feed.done(output)
        return TimingStats.from_samples(self.name, samples)


def _noop(*_args) -> None:
    return None


class CudaEventTimer:
    """CUDA events with L2 flush, launch latency hidden, device-wide synchronisation and input rotation."""

    name = "cuda-events"

    def __init__(self, l2_bytes: int, warmup_ms: float, rep_ms: float, min_reps: int, max_reps: int,
                 flush_l2: bool):
        self.warmup_s = warmup_ms / 1e3
        self.rep_s = rep_ms / 1e3
        self.min_reps, self.max_reps = min_reps, max_reps
        flush_bytes = max(2 * int(l2_bytes), 1 << 20)
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if flush_l2 else None
        self._events = [_cuda_event(enable_timing=True) for _ in range(3)]
        self._cycles_per_s = self._spin_rate()
        self._latency_s = statistics.median(all_ - stream for stream, all_, _, _ in
                                            (self._rep(_noop, (), 0) for _ in range(30)))

    def _spin_rate(self) -> float:
        """GPU clock cycles per second of torch.cuda._sleep, measured with events."""
        start, end = self._events[:2]
        _cuda_synchronize()
        _event_record(start)
        _cuda_sleep(1_000_000)
        _event_record(end)
        _cuda_synchronize()
        return 1_000_000 / (_event_elapsed(start, end) / 1e3)

    def _rep(self, fn, inputs, sleep_cycles: int, sleep_s: float = 0.0) -> tuple[float, float, bool, object]:
        """One repetition: (timed-stream seconds, device-wide seconds, whether the spin outlasted the launch, what the
        call returned: for the feed's done(), once the call is finished)."""
        start, end, end_all = self._events
        if self._flush is not None:
            _zero(self._flush)
        _cuda_synchronize()
        launched = _perf_counter()
        if sleep_cycles:
            _cuda_sleep(sleep_cycles)
        _event_record(start)
        output = fn(*inputs)
        _event_record(end)
        hidden = _perf_counter() - launched < sleep_s  # the GPU was still spinning when the last launch was queued
        _cuda_synchronize()  # device-wide: work on every stream has finished
        _event_record(end_all)
        _cuda_synchronize()
        return _event_elapsed(start, end) / 1e3, _event_elapsed(start, end_all) / 1e3, hidden, output

    def _warm_up(self, fn, inputs) -> tuple[float, float]:
        """Run until the warm-up budget is spent (the feed's work counted); (seconds per call with sync, the feed's
        work not counted; host seconds to launch one call)."""
        feed = as_feed(inputs)
        output = fn(*feed.next())  # first call: compilation, autotuning, lazy initialisation -- not representative
        _cuda_synchronize()
        feed.done(output)
        calls, launches, busy, start = 0, [], 0.0, _perf_counter()
        while calls < len(feed) or _perf_counter() - start < self.warmup_s:
            args = feed.next()
            _cuda_synchronize()  # the feed's GPU work (a draw) is not the call's
            launch_start = _perf_counter()
            output = fn(*args)
            launches.append(_perf_counter() - launch_start)
            _cuda_synchronize()
            busy += _perf_counter() - launch_start
            feed.done(output)
            calls += 1
        return busy / calls, statistics.median(launches)

    def measure(self, fn, inputs) -> TimingStats:
        """`inputs`: a list of input sets (rotated) or a feed (module docstring)."""
        feed = as_feed(inputs)
        per_call, launch_s = self._warm_up(fn, feed)
        reps = int(min(max(self.rep_s / max(per_call, 1e-7), self.min_reps), self.max_reps))
        feed.begin(reps)
        sleep_s = min(max(2 * launch_s + 10e-6, 20e-6), MAX_SPIN_S)
        stream, all_streams, redone = [], [], 0
        while len(stream) < reps:
            one_stream, device_wide, hidden, output = self._rep(fn, feed.next(), int(sleep_s * self._cycles_per_s),
                                                                sleep_s)
            feed.done(output)
            del output
            if not hidden and redone < reps:  # the host was late: the start event may have waited for the launch
                redone += 1
                if redone % 8 == 0:  # often late: a longer spin
                    sleep_s = min(2 * sleep_s, MAX_SPIN_S)
                continue
            stream.append(one_stream)
            all_streams.append(max(device_wide - self._latency_s, 0.0))
        return TimingStats.from_samples(self.name, repetition_times(stream, all_streams), stream, all_streams,
                                        launch_s=launch_s, spin_s=sleep_s, redone=redone)


def repetition_times(stream: list[float], all_streams: list[float]) -> list[float]:
    """Each repetition's time: the timed stream's, or the device-wide one where work on another stream ran past
    the end event by more than the device-wide estimate's noise (``DEVICE_WIDE_MARGIN``)."""
    return [a if a - s > max(DEVICE_WIDE_MARGIN[0], DEVICE_WIDE_MARGIN[1] * s) else s
            for s, a in zip(stream, all_streams)]


def make_timer(device: str, l2_bytes: int, settings: TimingSettings):
    """The timer for a device: CUDA events on a GPU, wall-clock on the CPU interpreter."""
    if device.startswith("cuda"):
        return CudaEventTimer(l2_bytes, warmup_ms=settings.warmup_ms, rep_ms=settings.rep_ms,
                              min_reps=settings.min_reps, max_reps=settings.max_reps, flush_l2=settings.flush_l2)
    return WallClockTimer(reps=settings.interpreter_reps)


def settled_baselines(timer, models: dict, inputs: list, rounds: int = 2, tolerance: float = 0.05):
    """({name: TimingStats dict}, notes): each of `models` timed `rounds` times, all of them per round, the last
    round kept. The baselines are measured once per run and every speed-up of the run divides by them, so they
    must not be read cold: earlier rounds warm the GPU up (its clocks after an idle spell, first uses;
    docs/measurements.md). A note says where an earlier round read slower than the kept one by more than `tolerance`."""
    measured = [{name: timer.measure(model, inputs) for name, model in models.items()} for _ in range(rounds)]
    first, kept = measured[0], measured[-1]
    notes = [f"baseline {name}: its first timing read {first[name].median_s / stats.median_s - 1:.0%} slower than "
             f"the one kept (the GPU warming up)" for name, stats in kept.items()
             if stats.median_s > 0 and first[name].median_s > (1 + tolerance) * stats.median_s]
    return {name: stats.to_dict() for name, stats in kept.items()}, notes


def fastest_baselines(readings: list[dict], tolerance: float = 0.05) -> tuple[dict, list[str]]:
    """({name: TimingStats dict}, notes) from the baseline jobs of several fresh processes (`readings`: each a
    {name: TimingStats dict}): per model the reading with the lowest median, so a slow process cannot inflate the
    run's speed-ups: a process may read slow for as long as it lives, every round alike (docs/measurements.md). A
    note says where a process read slower than the
    one kept by more than `tolerance`."""
    kept, notes = {}, []
    for name in sorted({n for reading in readings for n in reading}):
        medians = [(reading[name]["median_s"], i) for i, reading in enumerate(readings)
                   if (reading.get(name) or {}).get("median_s")]
        if not medians:
            continue
        best, index = min(medians)
        kept[name] = readings[index][name]
        slow = [(m, i) for m, i in medians if m > (1 + tolerance) * best]
        notes += [f"baseline {name}: process {i + 1} of {len(readings)} read {m / best - 1:.0%} slower than the one "
                  f"kept (a GPU's first processes can run slow)" for m, i in slow]
    return kept, notes


def unseen_stream_work(stats: TimingStats, min_gap_s: float = 20e-6) -> bool:
    """True when the device stayed busy well past the timed stream's end event: work ran on another stream."""
    gap = stats.all_streams_median_s - stats.stream_median_s
    return gap > max(min_gap_s, 0.5 * stats.stream_median_s)
