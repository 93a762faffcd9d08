"""Fork server (zygote) for evaluation workers: one warm process per Sandbox that forks a fresh worker per job.

Starting a worker from scratch costs an interpreter and the torch and triton imports (docs/measurements.md). The
zygote is started like a worker used to be (scrubbed environment, own session, private directory), imports torch, triton
and ``fitness.workers.worker`` (timers bound, launch counter installed) and from then on only forks. It never
initialises CUDA (a process forked after that cannot use CUDA), stays single-threaded (forking a threaded process is
unsafe; numpy's BLAS pool is held to one thread) and never runs candidate code: its children do.

Protocol, JSON lines; the Sandbox writes the zygote's stdin, one reader thread of the Sandbox reads its stdout::

    -> {"op": "fork", "id": ..., "workdir": ..., "log": ..., "env": {...}, "device": ..., "confine": true,
        "writable": [workdir, ...], "warm": {"judge": true, "gpu_lock": ...}}
    -> {"op": "kill", "id": ...}        kill the child's process group, if the child is not reaped yet
    <- {"ev": "ready", "pid": ..., "threads": ...}
    <- {"ev": "forked", "id": ..., "pid": ...}
    <- {"ev": "exit", "id": ..., "code": ...}     like Popen.returncode: negative for a signal

A child starts a new session, gets SIGKILL when the zygote dies (PR_SET_PDEATHSIG), reads /dev/null, writes its
log file, enters its own PID, mount and network namespaces (``fitness.confine``), works in its private directory with ``os.environ`` replaced by the worker environment, and runs
``fitness.workers.worker.serve``. When a child exits, the zygote kills its process group (nothing it started survives),
then reaps it: the pid cannot be reused before. EOF on stdin (the Sandbox is gone) kills every child and ends the
zygote; if the zygote dies, the Sandbox reports every worker still waiting on it as lost.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

from fitness.common.stage import STAGE_FILE

PR_SET_PDEATHSIG = 1
CHILD_FAILED = 70  # exit code of a child that could not become a worker


# the zygote process -------------------------------------------------------------------------------------------
class Server:
    def __init__(self):
        self.children: dict[int, str] = {}  # pid -> worker id, for children not reaped yet
        self.pids: dict[str, int] = {}
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        signal.set_wakeup_fd(self.wake_w)  # SIGCHLD wakes select()
        signal.signal(signal.SIGCHLD, lambda *_: None)
        import ctypes

        self.libc = ctypes.CDLL(None, use_errno=True)

    @staticmethod
    def send(message: dict) -> None:
        os.write(1, (json.dumps(message) + "\n").encode())

    def serve(self) -> None:
        self.send({"ev": "ready", "pid": os.getpid(), "threads": len(os.listdir("/proc/self/task"))})
        pending = b""
        while True:
            readable, _, _ = select.select([0, self.wake_r], [], [], 1.0)
            if self.wake_r in readable:
                while True:
                    try:
                        if not os.read(self.wake_r, 4096):
                            break
                    except BlockingIOError:
                        break
            self.reap()
            if 0 in readable:
                chunk = os.read(0, 1 << 16)
                if not chunk:
                    break
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    self.handle(json.loads(line))
        for pid in list(self.children):
            self.kill(pid)

    def handle(self, command: dict) -> None:
        if command["op"] == "fork":
            self.fork(command)
        elif command["op"] == "kill" and command["id"] in self.pids:
            self.kill(self.pids[command["id"]])

    def kill(self, pid: int) -> None:
        """Only for unreaped children: their pid (and group id) cannot have been reused."""
        for kill in (os.killpg, os.kill):  # the group exists once the child has called setsid
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def fork(self, command: dict) -> None:
        forked_at, zygote = time.monotonic(), os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"[zygote] fork failed: {exc}", file=sys.stderr, flush=True)
            self.send({"ev": "exit", "id": command["id"], "code": None})
            return
        if pid == 0:
            self.become_worker(command, forked_at, zygote)  # never returns
        self.children[pid] = command["id"]
        self.pids[command["id"]] = pid
        self.send({"ev": "forked", "id": command["id"], "pid": pid})

    def reap(self) -> None:
        """Report exited children: kill what is left of their process group first, then reap."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None or info.si_pid == 0:
                return
            pid = info.si_pid
            try:
                os.killpg(pid, signal.SIGKILL)  # the zombie still holds its pid: this is its own group
            except OSError:
                pass
            _, status = os.waitpid(pid, 0)
            worker_id = self.children.pop(pid, None)
            self.pids.pop(worker_id, None)
            if worker_id is not None:
                self.send({"ev": "exit", "id": worker_id, "code": os.waitstatus_to_exitcode(status)})

    def become_worker(self, command: dict, forked_at: float, zygote: int) -> None:
        code = CHILD_FAILED
        try:
            os.setsid()
            self.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != zygote:  # the zygote died before the death signal was armed
                os._exit(CHILD_FAILED)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self.wake_r)
            os.close(self.wake_w)
            null = os.open(os.devnull, os.O_RDONLY)
            log = os.open(command["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(null, 0)  # replaces the zygote's command pipes
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(null)
            os.close(log)
            from fitness.workers.confine import confine

            confinement = confine(command.get("writable", [command["workdir"]]), command["device"]) \
                if command.get("confine", True) \
                else {"enforced": [], "missing": {"all": "off"}}
            os.chdir(command["workdir"])
            os.environ.clear()
            os.environ.update(command["env"])
            tempfile.tempdir = None  # recomputed from the worker's TMPDIR
            from fitness.workers import worker

            worker.serve(command["device"], forked_at, {"forked_by": zygote, "confinement": confinement},
                         command.get("warm"))
        except SystemExit as exc:  # sys.exit in the candidate: its code, as a plain process would exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - a child must never return into the zygote's loop
            try:
                traceback.print_exc()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(code)


def warm_up() -> None:
    """Work every child would repeat, done once here (no CUDA, no threads): the imports of a first TorchDispatchMode
    (sympy and more) and of a first kernel launch (Triton's Gluon package), and, where kernels are compiled (not on
    Triton's interpreter, which never asks for it), Triton's hash of its own files and libtriton (the function moved
    between Triton versions; their costs: docs/measurements.md). Best effort."""
    import importlib

    import torch

    from fitness.judge.compile_ahead import NoKernelMode

    with NoKernelMode():
        torch.empty(1).view(1)  # allocation and a view: no compute, no thread pool started
    try:  # a kernel's first launch imports it (Triton's argument specialisation looks for Gluon's descriptor types):
        importlib.import_module("triton.experimental.gluon")  # on the interpreter too (docs/measurements.md)
    except ImportError:  # a Triton without Gluon
        pass
    if os.environ.get("TRITON_INTERPRET") == "1":
        return
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        try:
            key = getattr(importlib.import_module(module), "triton_key", None)
            if callable(key):
                key()
                return
        except Exception as exc:  # noqa: BLE001
            print(f"[zygote] warm-up skipped: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def main() -> None:
    # Ctrl-C in a terminal reaches the whole process group: the run that owns this server handles it and stops its
    # workers itself; the server and its workers (who inherit this) ignore it rather than die under their evaluations
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import fitness.workers.worker  # noqa: F401 - torch, triton, timers and launch counter, inherited by every child

    import torch

    warm_up()
    if torch.cuda.is_initialized():  # nothing forked from here could use CUDA: refuse loudly
        print("[zygote] CUDA was initialised in the fork server; no worker can be forked", file=sys.stderr,
              flush=True)
        os._exit(1)
    Server().serve()
    os._exit(0)


# the Sandbox's side -------------------------------------------------------------------------------------------
class WorkerHandle:
    """A worker as the Sandbox sees it: private directory and log; its pid and exit code once reported."""

    def __init__(self, worker_id: str, workdir: Path, trusted: bool):
        self.id, self.workdir, self.trusted = worker_id, workdir, trusted
        self.log_path = workdir / "worker.log"
        self.stage_path = workdir / STAGE_FILE
        self.pid: int | None = None
        self.code: int | None = None
        self.lost = False  # the zygote died before reporting this worker's exit
        self.zygote: Zygote | None = None
        self.forked_at: float | None = None
        self.forked = threading.Event()
        self.exited = threading.Event()

    def _lose(self) -> None:
        self.lost = True
        self.forked.set()
        self.exited.set()


class Zygote:
    """A started zygote process and the reader thread that dispatches its events to the worker handles."""

    def __init__(self, python: str, env: dict, workdir: Path):
        self.workdir = workdir
        self.log_path = workdir / "zygote.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([python, "-m", "fitness.workers.zygote"], cwd=workdir, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        self.pid = self.proc.pid
        self.threads: int | None = None
        self.dead = False
        self._lock = threading.Lock()  # the worker table and the dead flag
        self._write_lock = threading.Lock()
        self._workers: dict[str, WorkerHandle] = {}
        self._reader = threading.Thread(target=self._read, name="kernelevo-zygote-reader", daemon=True)
        self._reader.start()

    def _send(self, message: dict) -> None:
        """Write a command; never under self._lock (the reader needs it to drain the zygote's replies)."""
        try:
            with self._write_lock:
                self.proc.stdin.write((json.dumps(message) + "\n").encode())
                self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # the zygote is gone: the reader thread reports its workers lost

    def fork(self, handle: WorkerHandle, env: dict, device: str, confine: bool = True,
             writable: list[str] = (), warm: dict | None = None) -> None:
        """Ask for a worker; returns at once (the handle learns its pid and exit from the reader thread)."""
        with self._lock:
            if self.dead:
                handle._lose()
                return
            handle.zygote = self
            self._workers[handle.id] = handle
        self._send({"op": "fork", "id": handle.id, "workdir": str(handle.workdir), "log": str(handle.log_path),
                    "env": env, "device": device, "confine": confine,
                    "writable": [str(handle.workdir), *map(str, writable)], "warm": warm})

    def kill(self, handle: WorkerHandle) -> None:
        self._send({"op": "kill", "id": handle.id})

    @property
    def in_flight(self) -> int:
        """Workers asked for whose exit is not reported yet (running a job, idle spares, on their way)."""
        with self._lock:
            return len(self._workers)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            event = message.get("ev")
            if event == "ready":
                self.threads = message.get("threads")
                if self.threads and self.threads > 1:
                    warnings.warn(f"the fork server has {self.threads} threads: forking it may deadlock workers",
                                  RuntimeWarning, stacklevel=1)
                continue
            with self._lock:
                handle = (self._workers.pop if event == "exit" else self._workers.get)(message.get("id"), None)
            if handle is None:
                continue
            if event == "forked":
                handle.pid, handle.forked_at = message["pid"], time.perf_counter()
                handle.forked.set()
            elif event == "exit":
                handle.code = message.get("code")
                if handle.code is None:
                    handle.lost = True
                handle.forked.set()
                handle.exited.set()
        with self._lock:
            self.dead = True
            orphans, self._workers = list(self._workers.values()), {}
        for handle in orphans:
            handle._lose()

    def log_tail(self, chars: int) -> str:
        try:
            return self.log_path.read_bytes()[-chars:].decode(errors="replace")
        except OSError:
            return ""

    def _close_stdin(self) -> None:
        try:
            with self._write_lock:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def stop(self) -> None:
        """End the zygote (its children die with it) and wait for the reader to report the lost workers."""
        # EOF asks the zygote to kill its children's groups and leave; closing may wait behind a writer blocked on
        # a stuck zygote, so it happens in a thread of its own, and the kill below unblocks both.
        threading.Thread(target=self._close_stdin, daemon=True).start()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # only the zygote is in its process group: its children have their own sessions
            self.proc.wait()
        self._reader.join(timeout=5)
        self._log.close()


if __name__ == "__main__":
    main()
