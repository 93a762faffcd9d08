"""What a run shows while it runs: a live progress bar (tqdm) over the wall-time or generation budget with
evaluations done and in flight, evaluations per hour, GPU busy, the best time so far and the budget left; and the
GPU-busy sampler (NVML) that the bar and the search benchmark share.

The bar is drawn only on a terminal (tqdm's ``disable=None``); logs keep the one line per generation.
"""
from __future__ import annotations

import statistics
import threading
import time

from tqdm import tqdm

from fitness.result import format_seconds


def _handle(pynvml, gpu):
    """NVML's handle of a GPU given as an index or a UUID (as ``CUDA_VISIBLE_DEVICES`` lists it)."""
    gpu = str(gpu)
    return (pynvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit()
            else pynvml.nvmlDeviceGetHandleByUUID(gpu))


class GpuBusySampler(threading.Thread):
    """Samples NVML's utilisation (share of time a kernel was running) of some GPUs (NVML indices or UUIDs, as
    ``CUDA_VISIBLE_DEVICES`` lists them); no figures without NVML."""

    def __init__(self, indices=(0,), period_s: float = 0.1):
        super().__init__(daemon=True, name="kernelevo-gpu-busy")
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handles = pynvml, [_handle(pynvml, gpu) for gpu in indices]
        except Exception:  # no NVML (CPU machine, or no nvidia-ml-py): no utilisation figure
            self._nvml, self._handles = None, []
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []  # (time.time(), mean busy fraction over the GPUs)
        self._halt = threading.Event()

    @property
    def available(self) -> bool:
        return self._nvml is not None

    def run(self) -> None:
        while self._nvml is not None and not self._halt.is_set():
            busy = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu / 100 for h in self._handles]
            self.samples.append((time.time(), statistics.fmean(busy)))
            time.sleep(self.period_s)

    def busy(self, since: float | None = None, until: float | None = None) -> float | None:
        """Mean busy fraction of the samples taken within [since, until] (wall-clock times)."""
        values = [b for t, b in self.samples if (since is None or t >= since) and (until is None or t <= until)]
        return statistics.fmean(values) if values else None

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join()


class Progress:
    """A live bar refreshed from the search, the evaluation service and the store by a background thread."""

    def __init__(self, search, service, store, budget, gpus=(), period_s: float = 1.0, time_label: str = ""):
        self.search, self.service, self.store, self.budget = search, service, store, budget
        self.time_label = time_label  # said with the best time: "interpreter wall-clock" on the CPU interpreter
        self.sampler = GpuBusySampler(gpus) if gpus else None
        self.period_s = period_s
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="kernelevo-progress")

    def __enter__(self):
        self.started, self.done_before = time.time(), self.store.evaluation_count()
        total = self.budget.wall_time_s or None
        self.bar = tqdm(total=total, unit="s" if total else "gen", disable=None, dynamic_ncols=True, leave=False,
                        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} s {postfix}" if total else "{desc} {postfix}",
                        desc="[kernelevo]")
        if self.sampler is not None:
            self.sampler.start()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._halt.set()
        self._thread.join()
        if self.sampler is not None:
            self.sampler.stop()
        self.bar.close()

    def line(self) -> str:
        elapsed = max(time.time() - self.started, 1e-9)
        done = self.store.evaluation_count()
        rate = (done - self.done_before) / elapsed * 3600
        parts = [f"gen {max(self.search.generation, 0)}/{self.budget.generations}", f"evals {done}",
                 f"in flight {self.service.in_flight}", f"{rate:,.0f}/h"]
        busy = self.sampler.busy(since=time.time() - 10) if self.sampler is not None else None
        if busy is not None:
            parts.append(f"GPU busy {busy:.0%}")
        best = self.search.best_s
        label = f" ({self.time_label})" if self.time_label else ""
        parts.append(f"best{label} {format_seconds(best) if best != float('inf') else 'n/a'}")
        return " | ".join(parts)

    def _loop(self) -> None:
        while not self._halt.wait(self.period_s):
            if self.bar.total:
                self.bar.n = min(time.time() - self.started, self.bar.total)
            self.bar.set_postfix_str(self.line(), refresh=True)
