"""A worker waiting for the GPU's lock while another process holds it is not on its clock, up to its timeout once
more (``fitness.workers.job_clock.LockWait``): on one H200 with three problems, level2/96's evaluations were killed
at their 120 s limit in stages that include the lock's wait, likely behind a neighbour timing a seed of 2.2 s a call."""
import os
import threading
import time
from dataclasses import replace

from conftest import make_evaluator
from fitness.common.gpu_lock import DeviceLock, create_lock_files
from fitness.common.stage import GPU_WAIT_STAGE
from fitness.workers.job_clock import LockWait


def test_the_clock_pauses_only_while_another_process_holds_the_gpu_and_at_most_the_cap(tmp_path):
    path = str(tmp_path / "gpu-0.lock")
    create_lock_files(path, 0)
    other = os.getpid() + 1  # the waiting worker: not this process, which will hold the lock
    wait = LockWait(path, pid=other, cap_s=5.0)
    waiting = f"{GPU_WAIT_STAGE}, then timing the candidate"
    assert not wait.waiting(waiting)  # nobody holds it: no reason to wait
    with DeviceLock(path, exclusive=True):
        assert wait.waiting(waiting) and not wait.waiting("timing the candidate")
        wait.read(waiting, 10.0)
        wait.read(waiting, 12.5)
        wait.read("timing the candidate", 13.0)  # its turn came: the clock runs again
        wait.read(waiting, 20.0)
        assert wait.paused_s == 2.5
        wait.read(waiting, 30.0)
        assert wait.waited_s == 12.5 and wait.paused_s == 5.0  # capped: stage-writing code gains at most this
        holder = LockWait(path, pid=os.getpid(), cap_s=5.0)  # the holder itself saying it waits: its clock runs on
        holder.read(waiting, 1.0)
        holder.read(waiting, 50.0)
        assert holder.paused_s == 0.0
    assert not LockWait(None, other, 5.0).active


def test_a_job_waiting_for_the_gpu_another_process_holds_is_not_timed_out(tmp_path, sandbox):
    path = str(tmp_path / "gpu-0.lock")
    create_lock_files(path, 0)  # by the trusted side: confined workers cannot create files
    with make_evaluator(prestart_worker=False, sandbox=sandbox) as ev:
        job = replace(ev._job("baseline", baselines=["eager"]), gpu_lock=path)
        held = threading.Event()

        def hold(seconds):  # a neighbour timing on the GPU, until `seconds` after the worker began to wait for it
            with DeviceLock(path, exclusive=True):
                held.set()
                deadline = time.monotonic() + 60
                while not _waited_for(path) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(seconds)

        holder = threading.Thread(target=hold, args=(5.5,))  # past the timeout, however long the worker took to start
        holder.start()
        held.wait(5)
        outcome = ev._sandbox.run(job, timeout_s=4.0)  # waits for the lock longer than its timeout
        holder.join()
        assert outcome.status == "finished", outcome.failure_reason(4.0)
        assert outcome.result["phases_s"]["wait_shared"] > 4.0


def _waited_for(path: str) -> bool:
    """Whether some process waits for a flock on the lock or its gate (a "->" line of /proc/locks)."""
    inodes = {os.stat(name).st_ino for name in (path, f"{path}.gate")}
    with open("/proc/locks") as table:
        return any(fields[1] == "->" and int(fields[6].rsplit(":", 1)[-1]) in inodes
                   for fields in (line.split() for line in table) if len(fields) >= 7)
