"""A reader/writer lock per GPU, shared by every evaluation worker on the machine (flock on files).

Work that may share a GPU (building models and inputs, correctness trials, compiling on a first call) holds the
lock *shared*; timing holds it *exclusive*, so a timed kernel never shares its GPU with another candidate's kernels
or with a correctness trial. A stream of shared lockers must not starve a waiting timer, so every locker first
takes a gate file exclusively, then the lock itself, then releases the gate (writer preference): a waiting
exclusive locker holds the gate, and shared lockers that arrive after it queue behind it.

``timers_first`` (``fitness.timers_first``) goes further: every timer holds an *intent* file shared from the moment
it asks until it is done, and a shared locker first waits until no timer holds it. Timers that queue up then run
back to back, and the GPU changes hands between shared holders and timers (the timer waiting for the shared
holders in progress to leave: "drain") once per batch of timers instead of once per timer.

Creating a CUDA context also uses the GPU (the driver clears the new context's memory: a timed kernel ran 25 %
slower meanwhile), so a worker's start-up holds the lock shared too. Many starting at once held it shared for
seconds on end and starved the timer (``experiments/results/throughput_h100.md``): ``start_up`` lets one start-up
at a time per GPU into the shared lock, so a waiting timer gets the GPU after at most one of them (or, with
``fitness.start_up_under_lock=false``, outside the GPU's lock: contexts made and the judge warmed up during
timings, at most ``fitness.start_ups_at_once`` start-ups at a time).

Usage::

    with DeviceLock(path, exclusive=False):   # or exclusive=True; path None (CPU interpreter): no lock
        ...
    with start_up(path):                      # a worker creating its CUDA context
        ...
"""
from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from pathlib import Path

# the lock, its writer-preference gate, the timers' intent file; then the start-up slots (".start", ".start1", ...)
LOCK_SUFFIXES = ("", ".gate", ".intent")
MAX_START_UPS = 8  # start-up slot files created per GPU; fitness.start_ups_at_once may not exceed it


class DeviceLock:
    def __init__(self, path: str | None, exclusive: bool = True, timers_first: bool = False):
        self.path = path
        self.exclusive = exclusive
        self.timers_first = timers_first
        self._fds: list[int] = []

    @staticmethod
    def _open(path: str) -> int:
        """Read-only when the file exists (flock needs no write access; confined workers see a read-only
        filesystem, and the evaluator creates the files first: `create_lock_files`)."""
        try:
            return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __enter__(self):
        if not self.path:
            return self
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            if self.exclusive:  # every timer says it waits (held until it is done), whatever the shared side does
                self._fds.append(self._flock(f"{self.path}.intent", fcntl.LOCK_SH))
            elif self.timers_first:  # wait until no timer waits or times, then queue as usual
                os.close(self._flock(f"{self.path}.intent", fcntl.LOCK_EX))
            gate = self._flock(f"{self.path}.gate", fcntl.LOCK_EX)  # queue behind a waiting exclusive locker
            try:
                self._fds.append(self._flock(self.path, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH))
            finally:
                os.close(gate)  # closing the file releases its flock
        except BaseException:
            self.__exit__()
            raise
        return self

    def _flock(self, path: str, operation: int) -> int:
        fd = self._open(path)
        try:
            fcntl.flock(fd, operation)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def __exit__(self, *exc):
        while self._fds:
            os.close(self._fds.pop())  # the lock first, then the intent


def shared(path: str | None, timers_first: bool = False) -> DeviceLock:
    return DeviceLock(path, exclusive=False, timers_first=timers_first)


def exclusive(path: str | None) -> DeviceLock:
    return DeviceLock(path, exclusive=True)


@contextmanager
def start_up(path: str | None, hold_gpu: bool = True, at_once: int = 1, timers_first: bool = False):
    """At most `at_once` start-ups at a time per GPU (slot files, waited for *before* the GPU lock, so a start-up
    waiting for its turn holds nothing a timer needs), then the GPU's lock shared (`hold_gpu`; false: the start-up
    may overlap a timing)."""
    if not path:
        yield
        return
    if not 1 <= at_once <= MAX_START_UPS:
        raise ValueError(f"start-ups at once must be 1-{MAX_START_UPS}, got {at_once}")
    slots = [start_slot(path, i) for i in range(at_once)]
    fd = None
    for slot in slots:  # a free slot, else wait for one (by pid, so waiters spread over the slots)
        fd = DeviceLock._open(slot)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            os.close(fd)
            fd = None
    try:
        if fd is None:
            fd = DeviceLock._open(slots[os.getpid() % at_once])
            fcntl.flock(fd, fcntl.LOCK_EX)
        with shared(path if hold_gpu else None, timers_first):
            yield
    finally:
        if fd is not None:
            os.close(fd)


def start_slot(path: str, index: int) -> str:
    return f"{path}.start" if index == 0 else f"{path}.start{index}"


def physical_gpu(device: str, visible: str | None = None) -> str:
    """The GPU a process's `cuda:N` is, as ``CUDA_VISIBLE_DEVICES`` (`visible`; default: this process's) lists it
    (an index or a UUID); N itself when nothing is listed. Processes that each see one GPU as cuda:0 (a bench's
    runs, a Ray backend's actors) name different GPUs by it."""
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    listed = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
    ids = [i.strip() for i in listed.split(",") if i.strip()]
    return ids[index] if index < len(ids) else str(index)


def lock_path(cache_dir: Path, device: str, visible: str | None = None) -> str | None:
    """The lock file for a CUDA device (None on the CPU interpreter, where nothing is timed against a GPU), in a
    directory every user can traverse: workers that run as an unprivileged user open it too. Named by the physical
    GPU (`physical_gpu`), so processes share a lock only when they share the GPU."""
    if not device.startswith("cuda"):
        return None
    name = re.sub(r"[^\w.-]", "_", physical_gpu(device, visible))
    return str(Path(cache_dir) / f"gpu-{name}.lock")


def create_lock_files(path: str | None) -> None:
    """Create a GPU's lock, gate, intent and start-up files (by the trusted evaluator, before any worker runs), readable by all:
    flock needs only a read-only descriptor, and reading an empty file reveals nothing."""
    if path:
        Path(path).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        names = [f"{path}{suffix}" for suffix in LOCK_SUFFIXES] + [start_slot(path, i) for i in range(MAX_START_UPS)]
        for name in names:
            os.close(os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
            os.chmod(name, 0o644)
