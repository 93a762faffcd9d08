"""The sandbox's clock on a job, read from the worker's stage (``fitness.common.stage``) while it waits for the job.

* ``CompileClock``: how long the worker has been building one kernel (a stage beginning with COMPILE_STAGE); over
  ``fitness.compile_timeout_s`` it is killed (status ``compile_timeout``).
* ``MemoryWait``: time a worker spends waiting for a GPU memory slot (stage MEMORY_STAGE; ``gpu_lock.memory_slot``)
  is no time of the candidate's: the job's timeout is paused while it waits, but only while every slot really is
  held by another process (the sandbox reads the holders in /proc/locks), so candidate code that writes the stage
  cannot stop its clock: it waits at most as long as the others hold the GPU's memory.
  From the search's cut on (``Sandbox.run``'s `cut_at`), a worker still waiting is killed and the job ends
  ``cancelled``: it began no GPU work, and the search's budget is spent (the sandbox kills one still running
  anything else at the cut too).
* ``LockWait``: likewise the time a worker waits for the GPU's lock (stage GPU_WAIT_STAGE) while another process
  holds it, up to the job's own timeout once more.
"""
from __future__ import annotations

import os

from fitness.common.gpu_lock import memory_slot_files
from fitness.common.stage import BASELINE_COMPILE_STAGE, COMPILE_STAGE, GPU_WAIT_STAGE, MEMORY_STAGE

POLL_S = 0.25  # how often the stage of a watched job is read


class CompileClock:
    """How long a worker has been in its stage (read on the Sandbox's clock) when that stage is compiling (it begins
    with COMPILE_STAGE, or BASELINE_COMPILE_STAGE in a baseline job). The worker names each kernel Triton builds in a
    stage of its own (``fitness.common.stage.CompileStage``), so the limit is per kernel; where Triton does not report
    its builds, it is for the whole compile pass (a baseline's: each compiled baseline's)."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.stage: str | None = None
        self.since = 0.0

    def overdue(self, stage: str, now: float) -> bool:
        """Whether the worker has now been compiling for longer than the limit (`stage`: read at `now`)."""
        if stage != self.stage:
            self.stage, self.since = stage, now
        return stage.startswith((COMPILE_STAGE, BASELINE_COMPILE_STAGE)) and now - self.since > self.limit_s


def slot_holders(path: str, slots: int) -> dict[int, int] | None:
    """inode -> pid of the process holding it, for the GPU's memory slot files that are held now (from /proc/locks,
    where the kernel lists every flock); None where that cannot be read."""
    return file_holders(memory_slot_files(path, slots))


def file_holders(files: list[str]) -> dict[int, int] | None:
    """inode -> pid of a process holding a flock on it, for those of `files` held now (a shared lock may have several
    holders: one of them); None where that cannot be read."""
    try:
        inodes = {os.stat(name).st_ino for name in files if os.path.exists(name)}
        with open("/proc/locks") as table:
            lines = table.read().splitlines()
    except OSError:
        return None
    holders = {}
    for line in lines:  # "1: FLOCK  ADVISORY  WRITE 5849 fe:00:2147684 0 EOF"; "1: -> FLOCK ..." is a waiter
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK":
            inode = int(fields[5].rsplit(":", 1)[-1])
            if inode in inodes:
                holders[inode] = int(fields[4])
    return holders


class PausedWait:
    """The seconds a job's worker has spent in a wait that is no time of its own (``waiting``: a subclass's test of
    the stage and of who holds what), read at each poll (``read``): `waited_s`, and `paused_s`, what is added to its
    timeout (at most `cap_s`; None: no cap)."""

    cap_s: float | None = None

    def __init__(self):
        self.waited_s = 0.0
        self._last: float | None = None  # when the last read found it waiting

    @property
    def paused_s(self) -> float:
        return self.waited_s if self.cap_s is None else min(self.waited_s, self.cap_s)

    def waiting(self, stage: str) -> bool:
        raise NotImplementedError

    def read(self, stage: str, now: float) -> None:
        waiting = self.waiting(stage)
        if waiting and self._last is not None:
            self.waited_s += now - self._last
        self._last = now if waiting else None


class MemoryWait(PausedWait):
    """The seconds a job's worker (`pid`) has waited for a memory slot while all were held by others (`paused_s`,
    added to its timeout; none where the holders cannot be read), and whether it is still
    waiting past the search's cut (`cut`)."""

    def __init__(self, path: str | None, slots: int | None, pid: int | None, cancel_waiting_at: float | None = None):
        super().__init__()
        self.path, self.slots, self.pid, self.cancel_at = path, slots, pid, cancel_waiting_at

    @property
    def active(self) -> bool:
        return bool(self.path and self.slots)

    def waiting(self, stage: str) -> bool:
        if stage != MEMORY_STAGE:
            return False
        holders = slot_holders(self.path, self.slots)
        return holders is not None and len(holders) == self.slots and self.pid not in holders.values()

    def cut(self, stage: str, now: float) -> bool:
        return self.cancel_at is not None and now >= self.cancel_at and stage == MEMORY_STAGE


class LockWait(PausedWait):
    """The seconds a job's worker (`pid`) has waited for the GPU's lock (stage GPU_WAIT_STAGE) while another process
    held the lock or its gate (`paused_s`, added to its timeout, at most `cap_s`), so that a neighbour's timing is not
    counted against the job (docs/measurements.md). Candidate code that writes the stage gains at most `cap_s`, and
    only while others hold the GPU."""

    def __init__(self, path: str | None, pid: int | None, cap_s: float):
        super().__init__()
        self.files = [f"{path}{suffix}" for suffix in ("", ".gate")] if path else []
        self.pid, self.cap_s = pid, cap_s

    @property
    def active(self) -> bool:
        return bool(self.files)

    def waiting(self, stage: str) -> bool:
        if not stage.startswith(GPU_WAIT_STAGE):
            return False
        holders = file_holders(self.files)
        return bool(holders) and any(pid != self.pid for pid in holders.values())
