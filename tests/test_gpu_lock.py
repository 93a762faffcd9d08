"""The per-GPU reader/writer lock, between processes: shared holders coexist, an exclusive holder is alone, and a
waiting exclusive locker goes before shared lockers that arrive after it."""
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from fitness.common import gpu_lock
from fitness.common.gpu_lock import lock_path, shared_during_calls

ROOT = Path(__file__).resolve().parent.parent
HOLDER = """
import sys, time
from fitness.common.gpu_lock import DeviceLock, start_up
path, mode, hold, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
with start_up(path, hold_gpu=mode == "start") if mode.startswith("start") else DeviceLock(path, exclusive=mode == "ex"):
    start = time.monotonic()
    open(out + ".acquired", "w").close()
    time.sleep(hold)
    end = time.monotonic()
open(out, "w").write(f"{start} {end}")
"""


class Holder:
    """A process that takes the lock, holds it `hold` seconds and writes when it held it (monotonic clock)."""

    def __init__(self, tmp_path: Path, name: str, mode: str, hold: float):
        self.out = tmp_path / name
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "gpu-0.lock"), mode, str(hold),
                                      str(self.out)], cwd=ROOT)

    def wait_acquired(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not Path(f"{self.out}.acquired").exists():
            assert time.monotonic() < deadline, "the lock was never acquired"
            time.sleep(0.01)

    def interval(self) -> tuple[float, float]:
        assert self.proc.wait(timeout=20) == 0
        start, end = map(float, self.out.read_text().split())
        return start, end


def test_shared_holders_coexist(tmp_path):
    a, b = Holder(tmp_path, "a", "sh", 1.0), Holder(tmp_path, "b", "sh", 1.0)
    (a_start, a_end), (b_start, b_end) = a.interval(), b.interval()
    assert a_start < b_end and b_start < a_end  # the two intervals overlap


def test_exclusive_holder_excludes_shared_ones_and_vice_versa(tmp_path):
    writer = Holder(tmp_path, "w", "ex", 0.6)
    writer.wait_acquired()
    reader = Holder(tmp_path, "r", "sh", 0.1)
    assert reader.interval()[0] >= writer.interval()[1]
    reader = Holder(tmp_path, "r2", "sh", 0.6)
    reader.wait_acquired()
    writer = Holder(tmp_path, "w2", "ex", 0.1)
    assert writer.interval()[0] >= reader.interval()[1]


def test_waiting_exclusive_locker_goes_before_later_shared_ones(tmp_path):
    first = Holder(tmp_path, "first", "sh", 1.0)
    first.wait_acquired()
    writer = Holder(tmp_path, "w", "ex", 0.3)
    time.sleep(0.4)  # the writer is now waiting for the first reader
    late = Holder(tmp_path, "late", "sh", 0.1)
    (_, first_end), (w_start, w_end), (late_start, _) = first.interval(), writer.interval(), late.interval()
    assert first_end <= w_start and w_end <= late_start


def test_start_ups_take_turns_and_a_waiting_timer_goes_between_them(tmp_path):
    first = Holder(tmp_path, "s1", "start", 0.8)
    first.wait_acquired()
    reader = Holder(tmp_path, "r", "sh", 0.2)  # a correctness trial shares the GPU with a start-up
    second = Holder(tmp_path, "s2", "start", 0.3)
    time.sleep(0.3)  # the second start-up now waits for its turn, holding nothing of the GPU's lock
    timer = Holder(tmp_path, "t", "ex", 0.3)
    (s1_start, s1_end), (r_start, r_end) = first.interval(), reader.interval()
    (t_start, t_end), (s2_start, _) = timer.interval(), second.interval()
    assert r_start < s1_end and s1_start < r_end  # shared with the trial
    assert s1_end <= s2_start  # one start-up at a time
    assert s1_end <= t_start and t_end <= s2_start  # the timer waited for one start-up, not for the queue


def test_a_start_up_outside_the_gpu_lock_overlaps_a_timer_and_still_takes_turns(tmp_path):
    """fitness.start_up_under_lock=false: start-ups run while a candidate is timed, one at a time still."""
    first = Holder(tmp_path, "s1", "start-free", 0.8)
    first.wait_acquired()
    timer = Holder(tmp_path, "t", "ex", 0.3)
    second = Holder(tmp_path, "s2", "start-free", 0.1)
    (s1_start, s1_end), (t_start, t_end), (s2_start, _) = first.interval(), timer.interval(), second.interval()
    assert t_start < s1_end  # the timer did not wait for the start-up
    assert s1_end <= s2_start  # one start-up at a time


def test_no_lock_on_the_cpu_interpreter():
    assert lock_path(Path("/tmp"), "cpu") is None
    assert lock_path(Path("/c"), "cuda:1", visible="") == "/c/gpu-1.lock"


def test_the_lock_follows_the_physical_gpu_under_cuda_visible_devices():
    """Two processes that each see their own GPU as cuda:0 (a bench's runs, Ray actors) must not share a lock."""
    assert lock_path(Path("/c"), "cuda:0", visible="3") == "/c/gpu-3.lock"
    assert lock_path(Path("/c"), "cuda", visible="2,5") == "/c/gpu-2.lock"
    assert lock_path(Path("/c"), "cuda:1", visible="2, 5") == "/c/gpu-5.lock"
    assert lock_path(Path("/c"), "cuda:0", visible="MIG-GPU-ab/1/0") == "/c/gpu-MIG-GPU-ab_1_0.lock"


def test_a_capture_holds_the_gpu_only_while_it_benchmarks_and_once_for_nested_calls(tmp_path, monkeypatch):
    path = str(tmp_path / "gpu-0.lock")

    class Benchmarker:  # as Inductor's: benchmark() calls benchmark_gpu()
        def benchmark(self, fn):
            return self.benchmark_gpu(fn)

        def benchmark_gpu(self, fn):
            return fn()

    taken = []
    real_shared = gpu_lock.shared
    monkeypatch.setattr(gpu_lock, "shared", lambda p: taken.append(p) or real_shared(p))
    bench = Benchmarker()

    def autotune():  # runs inside the benchmark: the GPU is held; a nested benchmark does not lock again
        assert not _exclusive_free(path)
        return bench.benchmark_gpu(lambda: "timed")

    with shared_during_calls(path, bench, ("benchmark", "benchmark_gpu", "benchmark_gpu_with_cuda_graph")):
        assert _exclusive_free(path)  # compiling, between benchmarks: the neighbour times
        assert bench.benchmark(autotune) == "timed" and taken == [path]
        assert _exclusive_free(path)
        assert bench.benchmark_gpu(lambda: 1) == 1 and taken == [path, path]
    assert not vars(bench) and bench.benchmark(lambda: 2) == 2 and len(taken) == 2  # restored
    with shared_during_calls(None, bench, ("benchmark",)):  # the CPU interpreter: nothing patched
        assert not vars(bench)


def test_inductors_compiled_graph_runs_with_the_gpu_held_and_its_benchmarks_inside_lock_once(tmp_path, monkeypatch):
    """level1/90 on one H200: a neighbour's compiled cumprod ran outside the lock while a seed was timed, and the
    seed was rejected for work on another stream. Inside ``inductor_benchmarks_shared`` each run of a compiled graph
    holds the GPU; the autotuning benchmarks it runs inside do not lock again; both are restored on leaving."""
    from torch._inductor.output_code import CompiledFxGraph
    from torch._inductor.runtime.benchmarking import benchmarker

    path = str(tmp_path / "gpu-0.lock")
    taken, seen = [], []
    real_shared = gpu_lock.shared
    monkeypatch.setattr(gpu_lock, "shared", lambda p: taken.append(p) or real_shared(p))
    monkeypatch.setattr(type(benchmarker), "benchmark_gpu", lambda self, fn, **kw: fn(), raising=True)

    def first_run(graph, inputs):  # as Inductor's first call: its kernels autotuned on the GPU
        seen.append(_exclusive_free(path))  # a neighbour's timer cannot take the GPU now
        return benchmarker.benchmark_gpu(lambda: "ran")

    monkeypatch.setattr(CompiledFxGraph, "__call__", first_run)
    graph = object.__new__(CompiledFxGraph)
    with gpu_lock.inductor_benchmarks_shared(path):
        assert _exclusive_free(path)  # compiling: the neighbour times
        assert graph([]) == "ran" and taken == [path] and seen == [False]
        assert _exclusive_free(path)
    assert CompiledFxGraph.__call__ is first_run and graph([]) == "ran" and taken == [path]  # restored



def _exclusive_free(path: str) -> bool:
    """Whether a neighbour's timer would get the GPU now: the lock taken exclusively without waiting."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
