"""Timers for candidates and baselines; one method for both, so their times compare.

This module binds the clock functions it uses when it is imported, which the evaluation worker does before any
candidate code is imported: later patching of ``time`` or ``torch.cuda`` attributes cannot change the timer.

* ``CudaEventTimer``: CUDA events around each call, warm-up, the L2 flushed before every repetition (a buffer twice
  the profile's L2), a device-wide synchronisation after every repetition, inputs rotated among several sets,
  the number of repetitions sized to a time budget. Host wall-clock is kept beside the event time: work left on a
  stream the events do not see shows up as a gap between the two.
* ``WallClockTimer``: for Triton's CPU interpreter; times are labelled ``interpreter`` and mean nothing on a GPU.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

import torch

_perf_counter = time.perf_counter
_cuda_event = torch.cuda.Event
_cuda_synchronize = torch.cuda.synchronize


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
    wall_median_s: float

    @property
    def spread(self) -> float:
        """Inter-quartile range relative to the median."""
        return (self.p75_s - self.p25_s) / self.median_s if self.median_s > 0 else 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "spread": self.spread}

    @classmethod
    def from_samples(cls, timer: str, samples: list[float], walls: list[float]) -> "TimingStats":
        ordered = sorted(samples)
        quartiles = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else [ordered[0]] * 3
        return cls(timer=timer, n=len(ordered), median_s=statistics.median(ordered),
                   mean_s=statistics.fmean(ordered), min_s=ordered[0], max_s=ordered[-1], p25_s=quartiles[0],
                   p75_s=quartiles[2], wall_median_s=statistics.median(walls))

    @classmethod
    def from_dict(cls, data: dict | None) -> "TimingStats | None":
        if data is None:
            return None
        return cls(**{k: v for k, v in data.items() if k != "spread"})


class WallClockTimer:
    """Host wall-clock per call; for the CPU interpreter."""

    name = "interpreter"

    def __init__(self, reps: int = 3, warmup_calls: int = 1):
        self.reps = reps
        self.warmup_calls = warmup_calls

    def measure(self, fn, input_sets: list) -> TimingStats:
        for i in range(self.warmup_calls):
            fn(*input_sets[i % len(input_sets)])
        samples = []
        for i in range(self.reps):
            start = _perf_counter()
            fn(*input_sets[i % len(input_sets)])
            samples.append(_perf_counter() - start)
        return TimingStats.from_samples(self.name, samples, samples)


class CudaEventTimer:
    """CUDA events with L2 flush, device-wide synchronisation and input rotation."""

    name = "cuda-events"

    def __init__(self, l2_bytes: int, warmup_ms: float = 25.0, rep_ms: float = 100.0, min_reps: int = 10,
                 max_reps: int = 1000, flush_l2: bool = True):
        self.warmup_s = warmup_ms / 1e3
        self.rep_s = rep_ms / 1e3
        self.min_reps, self.max_reps = min_reps, max_reps
        flush_bytes = max(2 * int(l2_bytes), 1 << 20) if flush_l2 else 0
        self._flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device="cuda") if flush_l2 else None

    def _warm_up(self, fn, input_sets: list) -> float:
        """Run until the warm-up budget is spent (each input set at least once); the mean seconds per call."""
        calls, start = 0, _perf_counter()
        while calls < len(input_sets) or _perf_counter() - start < self.warmup_s:
            fn(*input_sets[calls % len(input_sets)])
            _cuda_synchronize()
            calls += 1
        return (_perf_counter() - start) / calls

    def measure(self, fn, input_sets: list) -> TimingStats:
        per_call = self._warm_up(fn, input_sets)
        reps = int(min(max(self.rep_s / max(per_call, 1e-7), self.min_reps), self.max_reps))
        starts = [_cuda_event(enable_timing=True) for _ in range(reps)]
        ends = [_cuda_event(enable_timing=True) for _ in range(reps)]
        walls = []
        for r in range(reps):
            inputs = input_sets[r % len(input_sets)]
            if self._flush is not None:
                self._flush.zero_()
            _cuda_synchronize()
            wall_start = _perf_counter()
            starts[r].record()
            fn(*inputs)
            ends[r].record()
            _cuda_synchronize()  # device-wide: work on every stream has finished
            walls.append(_perf_counter() - wall_start)
        samples = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]
        return TimingStats.from_samples(self.name, samples, walls)


def make_timer(device: str, l2_bytes: int, settings: dict):
    """The timer for a device: CUDA events on a GPU, wall-clock on the CPU interpreter."""
    if device.startswith("cuda"):
        return CudaEventTimer(l2_bytes, warmup_ms=settings.get("warmup_ms", 25.0),
                              rep_ms=settings.get("rep_ms", 100.0), min_reps=settings.get("min_reps", 10),
                              max_reps=settings.get("max_reps", 1000), flush_l2=settings.get("flush_l2", True))
    return WallClockTimer(reps=settings.get("interpreter_reps", 3))


def unseen_stream_work(stats: TimingStats, min_gap_s: float = 100e-6) -> bool:
    """True when the host saw the call take far longer than the events did: work ran on a stream they missed."""
    gap = stats.wall_median_s - stats.median_s
    return gap > max(min_gap_s, stats.median_s)
