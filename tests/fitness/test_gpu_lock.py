"""The per-GPU reader/writer lock, between processes: shared holders coexist, an exclusive holder is alone, and a
waiting exclusive locker goes before shared lockers that arrive after it."""
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO
from fitness.common import gpu_lock
from fitness.common.gpu_lock import lock_path, shared_during_calls

HOLDER = """
import os, sys, time
from fitness.common.gpu_lock import DeviceLock, start_up
path, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
with start_up(path, hold_gpu=mode == "start") if mode.startswith("start") else DeviceLock(path, exclusive=mode == "ex"):
    start = time.monotonic()
    open(out + ".acquired", "w").close()
    while not os.path.exists(out + ".release"):
        time.sleep(0.005)
    end = time.monotonic()
open(out, "w").write(f"{start} {end}")
"""
HANG_S = 120  # a holder that never gets the lock: a failure, not a measurement


class Holder:
    """A process that takes the lock, holds it until released and writes when it held it (the monotonic clock, one
    for every process: the order of the events). The tests order the events themselves: a holder is released, and
    another is started, only once the one before it holds the lock or waits for it (``waiting``)."""

    def __init__(self, tmp_path: Path, name: str, mode: str):
        self.out, self.lock = tmp_path / name, tmp_path / "gpu-0.lock"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(self.lock), mode, str(self.out)], cwd=REPO)

    def acquired(self) -> bool:
        return Path(f"{self.out}.acquired").exists()

    def wait_acquired(self) -> None:
        _until(self.acquired, f"{self.out.name} never got the lock")

    def release(self) -> None:
        Path(f"{self.out}.release").touch()

    def interval(self) -> tuple[float, float]:
        assert self.proc.wait(timeout=HANG_S) == 0
        start, end = map(float, self.out.read_text().split())
        return start, end


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def waiting(path: Path) -> int:
    """How many flock requests wait on `path` (the kernel's /proc/locks: "->" lines name the file's device and
    inode); the files are the test's own, so are the waiters."""
    st = path.stat()
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return sum(1 for line in Path("/proc/locks").read_text().splitlines()
               if "->" in line.split() and line.split()[line.split().index("->") + 5] == file)


def wait_waiting(path: Path, count: int = 1) -> None:
    _until(lambda: path.exists() and waiting(path) >= count, f"nothing came to wait on {path.name}")


def test_shared_holders_coexist(tmp_path):
    a = Holder(tmp_path, "a", "sh")
    a.wait_acquired()
    b = Holder(tmp_path, "b", "sh")
    b.wait_acquired()  # while a holds it
    a.release(), b.release()
    (a_start, a_end), (b_start, b_end) = a.interval(), b.interval()
    assert a_start < b_end and b_start < a_end  # the two intervals overlap


def test_exclusive_holder_excludes_shared_ones_and_vice_versa(tmp_path):
    for first_mode, then_mode in (("ex", "sh"), ("sh", "ex")):
        first = Holder(tmp_path, f"{first_mode}1", first_mode)
        first.wait_acquired()
        then = Holder(tmp_path, f"{then_mode}2", then_mode)
        wait_waiting(tmp_path / "gpu-0.lock")
        assert not then.acquired()
        first.release()
        then.wait_acquired()
        then.release()
        assert then.interval()[0] >= first.interval()[1]


def test_waiting_exclusive_locker_goes_before_later_shared_ones(tmp_path):
    first = Holder(tmp_path, "first", "sh")
    first.wait_acquired()
    writer = Holder(tmp_path, "w", "ex")
    wait_waiting(tmp_path / "gpu-0.lock")  # the writer waits for the first reader, holding the gate
    late = Holder(tmp_path, "late", "sh")
    wait_waiting(tmp_path / "gpu-0.lock.gate")  # the late reader queues behind it
    first.release()
    writer.wait_acquired()
    assert not late.acquired()
    writer.release()
    late.wait_acquired()
    late.release()
    (_, first_end), (w_start, w_end), (late_start, _) = first.interval(), writer.interval(), late.interval()
    assert first_end <= w_start and w_end <= late_start


def test_start_ups_take_turns_and_a_waiting_timer_goes_between_them(tmp_path):
    first = Holder(tmp_path, "s1", "start")
    first.wait_acquired()
    reader = Holder(tmp_path, "r", "sh")  # a correctness trial shares the GPU with a start-up
    reader.wait_acquired()
    second = Holder(tmp_path, "s2", "start")
    wait_waiting(tmp_path / "gpu-0.lock.start")  # the second start-up waits for its turn, holding nothing of the GPU
    timer = Holder(tmp_path, "t", "ex")
    wait_waiting(tmp_path / "gpu-0.lock")  # the timer waits for the start-up and the trial
    first.release(), reader.release()
    timer.wait_acquired()
    assert not second.acquired()
    timer.release()
    second.wait_acquired()
    second.release()
    (s1_start, s1_end), (r_start, r_end) = first.interval(), reader.interval()
    (t_start, t_end), (s2_start, _) = timer.interval(), second.interval()
    assert r_start < s1_end and s1_start < r_end  # shared with the trial
    assert s1_end <= s2_start  # one start-up at a time
    assert s1_end <= t_start and t_end <= s2_start  # the timer waited for one start-up, not for the queue


def test_a_start_up_outside_the_gpu_lock_overlaps_a_timer_and_still_takes_turns(tmp_path):
    """fitness.start_up_under_lock=false: start-ups run while a candidate is timed, one at a time still."""
    first = Holder(tmp_path, "s1", "start-free")
    first.wait_acquired()
    timer = Holder(tmp_path, "t", "ex")
    timer.wait_acquired()  # while the start-up holds its turn
    second = Holder(tmp_path, "s2", "start-free")
    wait_waiting(tmp_path / "gpu-0.lock.start")
    assert not second.acquired()
    first.release(), timer.release()
    second.wait_acquired()
    second.release()
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
