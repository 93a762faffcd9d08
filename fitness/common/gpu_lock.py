"""A reader/writer lock per GPU, shared by every evaluation worker on the machine (flock on files).

Work that may share a GPU (building models and inputs, correctness trials, compiling on a first call) holds the
lock *shared*; timing holds it *exclusive*, so a timed kernel never shares its GPU with another candidate's kernels
or with a correctness trial. A stream of shared lockers must not starve a waiting timer, so every locker first
takes a gate file exclusively, then the lock itself, then releases the gate (writer preference): a waiting
exclusive locker holds the gate, and shared lockers that arrive after it queue behind it.

Creating a CUDA context also uses the GPU (the driver clears the new context's memory, which can slow a kernel timed
meanwhile: docs/measurements.md), so a worker's start-up holds the lock shared too. Many starting at once would hold it
shared for seconds on end and starve the timer (docs/measurements.md): ``start_up`` lets one
start-up at a time per GPU into the shared lock, so a waiting timer gets the GPU after at most one of them (or, with
``fitness.start_up_under_lock=false``, one at a time outside the GPU's lock: contexts made and the judge warmed up
during timings). Neither several start-ups at once nor timers that queue taking the GPU back to back before any
shared work: neither raised throughput (docs/measurements.md).

Usage::

    with DeviceLock(path, exclusive=False):   # or exclusive=True; path None (CPU interpreter): no lock
        ...
    with start_up(path):                      # a worker creating its CUDA context
        ...
    with memory_slot(path, slots):            # a worker holding problem-sized device memory
        ...

Device memory is admitted apart from the GPU lock: ``memory_slot`` is a counting semaphore of `slots` files per GPU,
held from the moment a worker puts the problem's models and inputs on the device to its end (a worker that dies
releases it with its descriptors). Evaluations in flight are sized by the CPUs; only the part of each that holds
problem-sized memory waits for a slot, so a 6 GB problem admits one at a time into its trials and timing while the
others start, import and compile their kernels (on meta tensors) meanwhile.
"""
from __future__ import annotations

import fcntl
import functools
import os
import re
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / f"kernelevo-locks-{os.getuid()}"  # per user, shared by its runs
LOCK_SUFFIXES = ("", ".gate", ".start")  # the lock, its writer-preference gate, the one-start-up-at-a-time file


class DeviceLock:
    def __init__(self, path: str | None, exclusive: bool = True):
        self.path = path
        self.exclusive = exclusive
        self._fd: int | None = None

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
        gate = self._open(f"{self.path}.gate")
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)  # queue behind a waiting exclusive locker (it holds the gate)
            self._fd = self._open(self.path)
            fcntl.flock(self._fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        except BaseException:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            raise
        finally:
            os.close(gate)  # closing the file releases its flock
        return self

    def __exit__(self, *exc):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def shared(path: str | None) -> DeviceLock:
    return DeviceLock(path, exclusive=False)


def exclusive(path: str | None) -> DeviceLock:
    return DeviceLock(path, exclusive=True)


@contextmanager
def shared_during_calls(path: str | None, owner, names: tuple[str, ...]):
    """While inside, each call of `owner`'s methods `names` (those it has) holds the GPU's lock shared, and nothing
    between the calls does: a process that compiles for minutes and uses the GPU now and then (torch.compile's
    capture, autotuning Inductor's kernels: ``kernelevo.seeds.inductor.capture``) leaves a neighbour's timer the GPU
    between its benchmarks instead of starving it. A call inside another (Inductor's ``benchmark`` calls its
    ``benchmark_gpu``) does not lock again in the same thread: under writer preference a waiting timer holds the
    gate, and a second lock would wait behind it for the first. The methods are restored on leaving; no path (the
    CPU interpreter): nothing is patched. Nesting counts across every patched owner (``_HELD``): Inductor's compiled
    graph, patched too, runs its kernels' autotuning benchmarks inside its first call."""
    patched = [name for name in names if hasattr(owner, name)] if path else []

    def locked(method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            if getattr(_HELD, "held", False):
                return method(*args, **kwargs)
            with shared(path):
                _HELD.held = True
                try:
                    return method(*args, **kwargs)
                finally:
                    _HELD.held = False
        return call

    own = {name: vars(owner)[name] for name in patched if name in vars(owner)}  # an instance's own, if any
    for name in patched:
        setattr(owner, name, locked(getattr(owner, name)))
    try:
        yield
    finally:
        for name in patched:
            if name in own:
                setattr(owner, name, own[name])
            else:
                delattr(owner, name)


_HELD = threading.local()  # whether this thread holds a GPU's lock through a patched call (shared_during_calls)
# Inductor's benchmarker methods that run kernels on the GPU to choose among them (autotuning, max-autotune's
# templates, coordinate descent); one calls another, and those a torch version lacks are skipped
INDUCTOR_BENCHMARK_CALLS = ("benchmark", "benchmark_gpu", "benchmark_gpu_with_cuda_graph")


@contextmanager
def inductor_benchmarks_shared(path: str | None):
    """``shared_during_calls`` over Inductor's benchmarker and over each run of a graph Inductor compiled
    (``CompiledFxGraph.__call__``): a torch.compile inside holds the GPU's lock while it benchmarks and while the
    compiled model runs, not while it compiles (torch is imported only with a path: on a GPU), so no timing overlaps
    another process's compiled run (docs/measurements.md)."""
    if not path:
        yield
        return
    from torch._inductor.output_code import CompiledFxGraph
    from torch._inductor.runtime.benchmarking import benchmarker

    with shared_during_calls(path, benchmarker, INDUCTOR_BENCHMARK_CALLS), \
            shared_during_calls(path, CompiledFxGraph, ("__call__",)):
        yield


@contextmanager
def start_up(path: str | None, hold_gpu: bool = True):
    """One start-up at a time per GPU (its own exclusive file, waited for *before* the GPU lock, so a start-up
    waiting for its turn holds nothing a timer needs), then the GPU's lock shared (`hold_gpu`; false: the start-up
    may overlap a timing, one at a time still)."""
    if not path:
        yield
        return
    fd = DeviceLock._open(f"{path}.start")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with shared(path if hold_gpu else None):
            yield
    finally:
        os.close(fd)


MEMORY_POLL_S = 0.005


def memory_slot_files(path: str, slots: int) -> list[str]:
    return [f"{path}.mem{i}" for i in range(slots)]


@contextmanager
def memory_slot(path: str | None, slots: int | None):
    """One of `slots` memory slots of a GPU (None or no path: no admission, e.g. every evaluation in flight fits),
    taken by whichever is free first (polled: flock has no wait-for-any). The slot files exist first
    (``create_lock_files``)."""
    if not path or not slots:
        yield
        return
    fds = [DeviceLock._open(name) for name in memory_slot_files(path, slots)]
    try:
        while True:
            held = next((fd for fd in fds if _try_lock(fd)), None)
            if held is not None:
                break
            time.sleep(MEMORY_POLL_S)
        yield
    finally:
        for fd in fds:  # closing the held one releases its slot
            os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


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


def lock_files(path: str | None, memory_slots: int | None = None) -> list[str]:
    """A GPU's lock, gate, start-up and memory slot files (none on the CPU interpreter)."""
    if not path:
        return []
    return [*(f"{path}{suffix}" for suffix in LOCK_SUFFIXES), *memory_slot_files(path, memory_slots or 0)]


def create_lock_files(path: str | None, memory_slots: int | None = None) -> None:
    """Create a GPU's lock, gate and start-up files (by the trusted evaluator, before any worker runs), readable by all:
    flock needs only a read-only descriptor, and reading an empty file reveals nothing."""
    if path:
        Path(path).parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        for name in lock_files(path, memory_slots):
            os.close(os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
            os.chmod(name, 0o644)
