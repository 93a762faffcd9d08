"""The live progress line: evaluations done and in flight, the rate, the best time and the generation budget."""
from types import SimpleNamespace

from evo.runs.progress import GpuBusySampler, Progress
from evo.settings import Budget


class Counter:
    def __init__(self):
        self.done = 10

    def evaluation_count(self) -> int:
        return self.done


def test_the_line_shows_what_is_done_in_flight_and_best():
    store, service = Counter(), SimpleNamespace(in_flight=5)
    search = SimpleNamespace(generation=2, best_s=float("inf"), elapsed_s=0.0)
    with Progress(search, service, store, Budget(generations=4, wall_time_s=None), period_s=60) as progress:
        assert "best n/a" in progress.line()
        store.done, search.best_s = 25, 1.5e-4
        line = progress.line()
    assert "gen 2/4 (stops first)" in line and "evals 25" in line and "in flight 5" in line
    assert "best 150.0 us" in line
    rate = next(part for part in line.split(" | ") if part.endswith("/h"))
    assert float(rate.removesuffix("/h").replace(",", "")) > 0  # 15 evaluations since it started


def test_the_bar_follows_the_budget_that_will_stop_the_run():
    store, service = Counter(), SimpleNamespace(in_flight=0)
    search = SimpleNamespace(generation=1, best_s=float("inf"), elapsed_s=45.0)
    budget = Budget(generations=10, wall_time_s=60, max_evaluations=40)
    with Progress(search, service, store, budget, period_s=60) as progress:
        assert [text for _, text in progress.budgets()] == ["45/60 s", "evals 10/40", "gen 1/10"]
        store.done = 35
        assert progress.budgets()[0] == (35 / 40, "evals 35/40")
        assert progress.line().startswith("evals 35/40 (stops first) | 45/60 s | gen 1/10 | evals 35 |")


def test_the_busy_figure_samples_the_gpus_cuda_visible_devices_names():
    """A run on CUDA_VISIBLE_DEVICES=3 samples GPU 3 (NVML's index), not GPU 0; a UUID is looked up as one."""
    from evo.runs.progress import _handle
    from fitness.common.gpu_lock import physical_gpu

    nvml = SimpleNamespace(nvmlDeviceGetHandleByIndex=lambda i: ("index", i),
                           nvmlDeviceGetHandleByUUID=lambda u: ("uuid", u))
    assert _handle(nvml, physical_gpu("cuda:0", visible="3")) == ("index", 3)
    assert _handle(nvml, physical_gpu("cuda:1", visible="GPU-aa,GPU-bb")) == ("uuid", "GPU-bb")
    assert _handle(nvml, physical_gpu("cuda:1", visible="")) == ("index", 1)


def test_no_gpu_means_no_busy_figure():
    sampler = GpuBusySampler(indices=(0,))
    assert not sampler.available and sampler.busy() is None


def test_on_the_interpreter_the_best_time_is_labelled_wall_clock():
    search = SimpleNamespace(generation=1, best_s=2e-3, elapsed_s=0.0)
    with Progress(search, SimpleNamespace(in_flight=0), Counter(), Budget(generations=2, wall_time_s=None),
                  period_s=60, time_label="interpreter wall-clock") as progress:
        assert "best (interpreter wall-clock) 2.000 ms" in progress.line()
