"""What a run shows while it runs: a live progress bar (tqdm) over the budget nearest its end (generations, wall
time or evaluations: the one that will stop the run, named so, the others beside it) with evaluations done and in
flight, evaluations per hour, GPU busy and the best time so far; and the GPU-busy sampler (NVML) that the bar and
the search benchmark share.

The bar is drawn only on a terminal (tqdm's ``disable=None``); logs keep the one line per generation.
"""
from __future__ import annotations

import statistics
import threading
import time

from tqdm import tqdm

from fitness.common.formatting import seconds as format_seconds


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
        self.bar = tqdm(total=100, disable=None, dynamic_ncols=True, leave=False, desc="[kernelevo]",
                        bar_format="{desc} {bar}| {postfix}")
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

    def budgets(self) -> list[tuple[float, str]]:
        """(fraction used, text) of every budget that can stop the run, the one nearest its end first: the bar
        follows that one (patience aside, which no fraction foretells)."""
        b, used = self.budget, []
        used.append((max(self.search.generation, 0) / b.generations if b.generations else 1.0,
                     f"gen {max(self.search.generation, 0)}/{b.generations}"))
        if b.wall_time_s:
            elapsed = self.search.elapsed_s
            used.append((elapsed / b.wall_time_s, f"{elapsed:.0f}/{b.wall_time_s:g} s"))
        if b.max_evaluations:
            done = self.store.evaluation_count()
            used.append((done / b.max_evaluations, f"evals {done}/{b.max_evaluations}"))
        return sorted(used, key=lambda u: -u[0])

    def line(self) -> str:
        elapsed = max(time.time() - self.started, 1e-9)
        done = self.store.evaluation_count()
        rate = (done - self.done_before) / elapsed * 3600
        budgets = self.budgets()
        parts = [f"{budgets[0][1]} (stops first)", *[text for _, text in budgets[1:]], f"evals {done}",
                 f"in flight {self.service.in_flight}", f"{rate:,.0f}/h"]
        busy = self.sampler.busy(since=time.time() - 10) if self.sampler is not None else None
        if busy is not None:
            parts.append(f"GPU busy {busy:.0%}")
        best = self.search.best_s
        label = f" ({self.time_label})" if self.time_label else ""
        parts.append(f"best{label} {format_seconds(best) if best != float('inf') else 'n/a'}")
        return " | ".join(dict.fromkeys(parts))

    def _loop(self) -> None:
        while not self._halt.wait(self.period_s):
            self.bar.n = min(100.0, 100 * self.budgets()[0][0])
            self.bar.set_postfix_str(self.line(), refresh=True)
