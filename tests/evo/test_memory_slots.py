"""Problem-sized GPU memory is admitted apart from evaluations in flight: in flight follow the cores, and a few
evaluations at a time hold the problem's memory (``gpu_lock.memory_slot``), the others starting and compiling
meanwhile. A worker waiting for a slot others hold is not on its clock, and is cancelled past the search's cut."""
import os
import threading
import time
from dataclasses import replace

from conftest import candidate, make_evaluator
from evo.benchmark.bench import BenchTask, launch
from evo.service.evaluation import SEARCHES_ON_HOST, auto_parallel, memory_slots
from fitness.common.gpu_lock import create_lock_files, memory_slot, memory_slot_files
from fitness.workers.job_clock import MemoryWait, slot_holders
from fitness.measure.result import WorkerJob
from fitness.common.stage import MEMORY_STAGE

GIB = 1 << 30


def test_in_flight_follow_the_cores_and_memory_slots_the_problems_footprint():
    assert auto_parallel(cpus=16) == 14 and auto_parallel(cpus=2) == 2
    assert auto_parallel(cpus=16, gpu_bytes=[80 * GIB]) == 14  # contexts fit: cores bound
    assert auto_parallel(cpus=64, gpu_bytes=[8 * GIB]) == 6  # 80 % of 8 GiB holds six contexts
    assert memory_slots(80 * GIB, 14, 64 << 20) is None  # a small problem: all fourteen fit at once
    assert memory_slots(80 * GIB, 14, 6 * GIB) == 1  # KernelBench-sized tensors: one at a time, never none
    assert memory_slots(80 * GIB, 14, 2 * GIB) == 2  # (64 - 14 GiB of contexts) // 20 GiB
    assert memory_slots(80 * GIB, 2, 2 * GIB) is None


def test_in_flight_share_the_cores_among_a_benchs_searches_on_the_host(monkeypatch):
    assert auto_parallel(cpus=16, searches=2) == 7  # what issue 43's benches set by hand: PER_GPU=2 PARALLEL=7
    assert auto_parallel(cpus=16, searches=8) == 2  # never fewer than two
    assert auto_parallel(cpus=64, gpu_bytes=[8 * GIB], searches=4) == 6  # memory still bounds
    monkeypatch.setenv(SEARCHES_ON_HOST, "2")  # as the bench launches each search (evo.benchmark.bench.launch)
    assert auto_parallel(cpus=16) == 7
    monkeypatch.setenv(SEARCHES_ON_HOST, "not a number")
    assert auto_parallel(cpus=16) == 14
    monkeypatch.delenv(SEARCHES_ON_HOST)
    assert auto_parallel() == max(2, len(os.sched_getaffinity(0)) - 2)  # this process's cores, not the host's


def test_a_bench_tells_each_search_how_many_share_the_host(tmp_path, monkeypatch):
    started = {}

    class Recorded:  # the bench's Searches, recording the environment a search starts in
        def start(self, command, env, **kwargs):
            started.update(env)
            return object()

    task = BenchTask("level1/19", str(tmp_path / "19.py"))
    assert launch(task, tmp_path, None, Recorded(), threads=8, sharing=2) is not None
    assert started[SEARCHES_ON_HOST] == "2"


def test_a_memory_slot_is_held_by_at_most_slots_holders_at_once(tmp_path):
    path = str(tmp_path / "gpu-0.lock")
    create_lock_files(path, 2)
    assert all(os.path.exists(name) for name in memory_slot_files(path, 2))
    inside, peak, guard = [0], [0], threading.Lock()

    def hold():
        with memory_slot(path, 2):
            with guard:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.1)
            with guard:
                inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 2 and inside[0] == 0 and not any(t.is_alive() for t in threads)


def test_the_clock_pauses_only_while_every_slot_is_held_by_another_process(tmp_path):
    path = str(tmp_path / "gpu-0.lock")
    create_lock_files(path, 1)
    other = os.getpid() + 1  # the waiting worker: not this process, which will hold the slot
    wait = MemoryWait(path, 1, pid=other, cancel_waiting_at=100.0)
    assert slot_holders(path, 1) == {} and not wait.waiting(MEMORY_STAGE)  # a slot free: no reason to wait
    with memory_slot(path, 1):
        assert list(slot_holders(path, 1).values()) == [os.getpid()]
        assert wait.waiting(MEMORY_STAGE) and not wait.waiting("correctness trial 1/5")
        wait.read(MEMORY_STAGE, 10.0)
        wait.read(MEMORY_STAGE, 12.5)
        wait.read("correctness trial 1/5", 13.0)  # its turn came: the clock runs again
        wait.read(MEMORY_STAGE, 20.0)
        assert wait.paused_s == 2.5
        holder = MemoryWait(path, 1, pid=os.getpid())  # the holder itself saying it waits: its clock runs on
        holder.read(MEMORY_STAGE, 1.0)
        holder.read(MEMORY_STAGE, 50.0)
        assert holder.paused_s == 0.0 and not holder.waiting(MEMORY_STAGE)
    assert not wait.cut(MEMORY_STAGE, 99.0) and wait.cut(MEMORY_STAGE, 100.0) and not wait.cut("timing", 100.0)


def _baseline_job(ev, path: str) -> WorkerJob:
    return replace(ev._job("baseline", baselines=["eager"]), gpu_lock=path, memory_slots=1)


def test_a_worker_waiting_for_memory_others_hold_is_not_timed_out_and_is_cancelled_past_the_cut(tmp_path, sandbox):
    path = str(tmp_path / "gpu-0.lock")
    create_lock_files(path, 1)  # by the trusted side: confined workers cannot create files
    with make_evaluator(prestart_worker=False, sandbox=sandbox) as ev:
        judged = ev._sandbox.run(replace(ev._job("candidate", source=candidate("good")), gpu_lock=path,
                                         memory_slots=1), timeout_s=120.0)  # a candidate's job holds a slot too
        assert judged.result["status"] == "ok" and "wait_memory" in judged.result["phases_s"], judged.result
        held, release, events = threading.Event(), threading.Event(), []

        def hold(until):
            with memory_slot(path, 1):
                held.set()
                release.wait(until)  # until told (a timer, or the job's end); a safety cap, not a bound asserted
                events.append("released")

        job = _baseline_job(ev, path)
        holder = threading.Thread(target=hold, args=(60.0,))
        holder.start()
        held.wait(5)
        timer = threading.Timer(8.0, release.set)  # the slot held twice the job's timeout after it began
        timer.start()
        outcome = ev._sandbox.run(job, timeout_s=4.0)  # waits for the slot longer than its timeout
        events.append("job ended")
        holder.join()
        timer.cancel()
        assert outcome.status == "finished", outcome.failure_reason(4.0)  # not timed out: its wait is off its clock
        assert events == ["released", "job ended"] and outcome.result["phases_s"]["wait_memory"] > 0

        held.clear(), release.clear(), events.clear()
        holder = threading.Thread(target=hold, args=(60.0,))  # held until the job has ended
        holder.start()
        held.wait(5)
        outcome = ev._sandbox.run(job, timeout_s=60.0, cut_at=time.perf_counter() + 2.0)
        events.append("job ended")
        release.set()
        holder.join()
        # cancelled at the cut while still waiting for the slot (without the cut it would have waited for the
        # holder's release, which comes only after the job's end, and then run: "finished")
        assert outcome.status == "cancelled" and outcome.result is None and events == ["job ended", "released"]
