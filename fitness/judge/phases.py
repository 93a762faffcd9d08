"""A worker's bookkeeping of where its time goes, and the waits that count: ``phase`` adds a block's seconds to
PHASES (and its wall-clock span to SPANS for the stages in SPAN_PHASES); ``gpu_lock`` and ``memory_held`` take
the job's GPU lock and memory slot, their waits counted as phases. Reported with the result
(``fitness.workers.worker``)."""
from __future__ import annotations

import time
from contextlib import contextmanager

from fitness.common.gpu_lock import DeviceLock, memory_slot
from fitness.judge.inputs import synchronize
from fitness.common.stage import GPU_WAIT_STAGE, MEMORY_STAGE, STAGE, stage

PHASES: dict = {}
SPANS: list = []  # [phase, wall start, wall end] of the stages below, in the order they ended
SPAN_PHASES = frozenset({"cuda_init", "warm_judge", "setup", "compile", "wait_memory", "wait_shared", "trials",
                         "coverage", "probes", "parameters", "differential",
                         "wait_exclusive", "timing", "profile"})
WALL = time.time  # bound before any candidate code exists


class phase:
    """Adds the seconds spent in a `with phase("name"):` block to PHASES (reported with the result)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.start, self.wall = time.perf_counter(), WALL()

    def __exit__(self, *exc):
        PHASES[self.name] = PHASES.get(self.name, 0.0) + time.perf_counter() - self.start
        if self.name in SPAN_PHASES:
            SPANS.append([self.name, self.wall, WALL()])


@contextmanager
def gpu_lock(job, exclusive: bool):
    """The job's GPU lock (none on the CPU interpreter), the wait for it counted as wait_shared / wait_exclusive."""
    lock = DeviceLock(job.gpu_lock, exclusive=exclusive)
    before = STAGE[0]
    if job.gpu_lock:  # the sandbox stops the job's clock while others hold the lock (job_clock.LockWait)
        stage(f"{GPU_WAIT_STAGE}, then {before}" if before else GPU_WAIT_STAGE)
    with phase("wait_exclusive" if exclusive else "wait_shared"):
        lock.__enter__()
    if job.gpu_lock:
        stage(before)
    try:
        yield
    finally:
        try:  # the device is idle before the lock goes: nothing of this worker runs on once it is released
            synchronize(job.device)
        except Exception:  # noqa: BLE001 - a CUDA error is reported by the code that hit it
            pass
        lock.__exit__()


@contextmanager
def memory_held(job):
    """The job's GPU memory slot (``gpu_lock.memory_slot``), the wait for it counted as wait_memory."""
    slot = memory_slot(job.gpu_lock, job.memory_slots)
    if job.memory_slots and job.gpu_lock:
        stage(MEMORY_STAGE)  # the sandbox stops this job's clock while others hold every slot
    with phase("wait_memory"):
        slot.__enter__()
    try:
        yield
    finally:
        slot.__exit__(None, None, None)
