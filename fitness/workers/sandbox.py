"""Process isolation for untrusted candidates, many jobs at a time.

Every job runs in a process of its own, forked for it by the Sandbox's fork server (``fitness.workers.zygote``: torch
and triton imported once, CUDA untouched), in a private directory with a private Triton and Inductor cache and an
environment stripped of secrets and provider variables. A crash, a hang past the timeout, a CUDA error or
``os._exit`` costs that one job: its process group is killed or simply gone, and the next job gets a new process.
A job may also have a compile time limit: a worker whose stage says it has been building one kernel for longer is
killed (``fitness.workers.job_clock.CompileClock``; status ``compile_timeout``). A worker waiting for a GPU memory slot
held by others is not on the clock, and is cancelled past the search's cut (``fitness.workers.job_clock.MemoryWait``);
nor, up to its timeout once more, is one waiting for the GPU's lock held by others (``job_clock.LockWait``).
A pool of ``spares`` workers, forked and with CUDA initialised ahead of their jobs, hides the start-up cost.

``run`` may be called from many threads at once. Trusted jobs (baselines) use a persistent cache; they also build
Triton's driver stubs (``cuda_utils``, and per-signature ``__triton_launcher`` modules on Triton < 3.5) once, and
every untrusted worker gets a *copy* of them in its private cache, so no candidate pays gcc for them and none can
alter the shared ones. Stubs are only ever copied from the trusted cache.
"""
from __future__ import annotations

import logging
import json
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from fitness.common.atomic import write_atomic
from fitness.workers.job_clock import POLL_S, CompileClock, LockWait, MemoryWait
from kernelevo.core.evaluation_record import NOT_JUDGED
from fitness.measure.result import WorkerJob
from fitness.workers.worker_env import STUB_MARKER, copy_stubs, stub_files, triton_version, worker_environment
from fitness.workers.zygote import WorkerHandle, Zygote

log = logging.getLogger(f"kernelevo.{__name__}")

LOG_TAIL_CHARS = 3000
START_TIMEOUT_S = 300.0  # a zygote that has not forked a requested worker by then is restarted
KILL_WAIT_S = 30.0  # after a kill, how long to wait for the exit before reporting the timeout anyway
PREWARM_TIMEOUT_S = 600.0


_WARNED: set = set()


def warn_unconfined(missing: dict | None) -> None:
    """Once per process and mechanism: say loudly that the OS did not confine candidates that way, and why."""
    for mechanism, why in (missing or {}).items():
        if mechanism not in _WARNED:
            _WARNED.add(mechanism)
            log.warning(f"WARNING: candidate workers run without {mechanism} confinement ({why}); see "
                        f"docs/evaluator.md, 'What the evaluator checks'")


@dataclass
class JobOutcome:
    status: str  # "finished", "timeout", "compile_timeout", "cancelled" (killed at the search's cut), "crashed"
    result: dict | None
    exit_code: int | None
    log_tail: str
    wall_s: float
    pid: int | None = None
    lost: bool = False  # the fork server died before the worker's exit was known
    stage: str = ""  # what the job was doing when it ended (the worker's STAGE_FILE); "" before its job began
    unstarted: str = ""  # why the job never reached a worker (none forked in time, the job not written); "" if it did
    compile_timeout_s: float | None = None  # the compile time limit the job ran under

    @property
    def infrastructure(self) -> bool:
        """No verdict, for a reason the candidate cannot cause: the job never reached a worker, the fork server died
        under it, or the worker failed before taking its job (CUDA initialisation). Not the kernel's verdict: never
        to be cached as one. A candidate that crashes or hangs its own worker is judged by that (crashed, timeout)."""
        return bool(self.unstarted) or self.lost or (self.result or {}).get("infrastructure") is True

    def failure_reason(self, timeout_s: float, context: str = "") -> str:
        """Why no verdict came back; `context` (the sizes, a hint) is added to a timeout's reason. The reason of an
        infrastructure failure ends with NOT_JUDGED."""
        if self.unstarted:
            return f"{self.unstarted} {NOT_JUDGED}"
        if self.status == "compile_timeout":
            return (f"the worker was still {self.stage} after {self.compile_timeout_s:g} s and was killed "
                    f"(fitness.compile_timeout_s={self.compile_timeout_s:g}): kernels compile in seconds, but a "
                    f"launch configuration whose tile is too large for its warps can take Triton minutes; if these "
                    f"kernels really need longer, raise fitness.compile_timeout_s")
        if self.status == "timeout":
            doing = self.stage or "starting the worker, before the job began"
            return (f"the evaluation did not finish within {timeout_s:g} s and was killed while {doing}"
                    + (f"; {context}" if context else ""))
        if self.lost:
            return f"the worker process was lost before writing a result: its fork server died {NOT_JUDGED}"
        if self.infrastructure:
            return f"{self.result.get('reason') or 'the worker failed before its job began'} {NOT_JUDGED}"
        code = self.exit_code
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with code {code}"
        while_ = f" while {self.stage}" if self.stage else ""
        return (f"the worker process {how}{while_} before writing a result (segfault, os._exit or sys.exit in the "
                f"candidate?)")


def read_result(path: Path, token: str) -> dict | None:
    """The worker's result, or None when there is none; a file without the job's token (written by candidate code,
    not by the worker) becomes a rejection."""
    try:
        result = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError:
        result = {}
    if not isinstance(result, dict) or result.pop("token", None) != token:
        return {"status": "rejected", "reason": "the result file was not written by the evaluator (candidate code "
                                                "wrote or altered it)"}
    return result


class Sandbox:
    """Runs jobs in forked worker processes, from many threads at once; a pool of warm spares for untrusted jobs,
    a persistent cache for trusted ones."""

    def __init__(self, device: str, trusted_cache_dir: Path | None = None, spares: int = 1,
                 python: str = sys.executable, base_env: dict | None = None, confine: bool = True,
                 warm: dict | None = None):
        self.device = device
        self.warm = warm  # {"judge", "gpu_lock", "start_up_under_lock"}: the lock every worker starts up under
        # (whether its start-up holds it), whether an untrusted spare warms the judge before its job
        # (fitness.workers.warm)
        self.confine = confine  # OS namespaces and limits for every worker (fitness/workers/confine.py)
        self.interpret = not device.startswith("cuda")
        self.trusted_cache_dir = Path(trusted_cache_dir) if trusted_cache_dir else None
        self.spares = max(int(spares), 0)
        self.python = python
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.root = Path(tempfile.mkdtemp(prefix="kernelevo-sandbox-"))
        self.root.chmod(0o711)  # workers of their own user ids reach their directories; none can list the others
        self._lock = threading.Lock()  # the zygote, the spare pool and its pending count
        self._zygote: Zygote | None = None
        self._pool: list[WorkerHandle] = []
        self._pending = 0
        self._count = 0
        self._closed = False
        self._stubs_lock = threading.Lock()
        self._stubs: list[Path] | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # workers ---------------------------------------------------------------------------------------------------
    def _zygote_locked(self) -> Zygote:
        """The running zygote, started (again) when there is none or it died; call with self._lock held."""
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        if self._zygote is None or self._zygote.dead:
            if self._zygote is not None:
                self._zygote.stop()
            workdir = Path(tempfile.mkdtemp(prefix="zygote-", dir=self.root))
            env = worker_environment(self.base_env, workdir, self.interpret)
            env["OPENBLAS_NUM_THREADS"] = "1"  # numpy's BLAS pool starts threads at import: the zygote must have none
            self._zygote = Zygote(self.python, env, workdir)
        return self._zygote

    @property
    def zygote_pid(self) -> int | None:
        with self._lock:
            return self._zygote.pid if self._zygote is not None and not self._zygote.dead else None

    def _fork(self, trusted: bool) -> WorkerHandle:
        with self._lock:
            self._count += 1
            worker_id = f"w{self._count}"
        workdir = Path(tempfile.mkdtemp(prefix=f"{worker_id}-", dir=self.root))
        handle = WorkerHandle(worker_id, workdir, trusted)
        env = worker_environment(self.base_env, workdir, self.interpret, self.trusted_cache_dir if trusted else None)
        if not trusted and self._stubs:
            copy_stubs(self._stubs, workdir / "triton")
        with self._lock:
            zygote = self._zygote_locked()
        writable = [self.trusted_cache_dir] if trusted and self.trusted_cache_dir else []
        for path in writable:
            path.mkdir(parents=True, exist_ok=True)
        # every worker starts up under the GPU's shared lock; only an untrusted spare warms the judge
        warm = {**(self.warm or {}), "judge": False} if trusted else self.warm
        zygote.fork(handle, env, self.device, self.confine, writable, warm)
        return handle

    def _purge_locked(self) -> None:
        """Drop spares that died while idle (or with their zygote); call with self._lock held."""
        for handle in [h for h in self._pool if h.exited.is_set()]:
            self._pool.remove(handle)
            shutil.rmtree(handle.workdir, ignore_errors=True)

    def _take_spare(self) -> WorkerHandle | None:
        with self._lock:
            self._purge_locked()
            return self._pool.pop(0) if self._pool else None

    def _replenish(self) -> None:
        """Fork spares until `spares` are idle or on their way; they initialise CUDA while jobs run."""
        with self._lock:
            self._purge_locked()
            need = max(self.spares - len(self._pool) - self._pending, 0)
            self._pending += need
        made = 0
        try:
            for _ in range(need):
                handle = self._fork(trusted=False)
                with self._lock:
                    self._pool.append(handle)
                    self._pending -= 1
                made += 1
        finally:
            with self._lock:
                self._pending -= need - made

    def _ensure_stubs(self) -> None:
        """Once per Sandbox on a GPU: Triton's driver stubs for this Triton in the trusted cache (a trusted prewarm
        job builds them when they are missing), listed for copying into untrusted workers."""
        if self._stubs is not None:
            return
        with self._stubs_lock:
            if self._stubs is not None:
                return
            if self.interpret or self.trusted_cache_dir is None:
                self._stubs = []
                return
            cache = self.trusted_cache_dir / "triton"
            marker, version = cache / STUB_MARKER, triton_version()
            try:
                current = json.loads(marker.read_text()).get("triton") == version and version is not None
            except (OSError, ValueError):
                current = False
            if not current:
                outcome = self.run(WorkerJob("prewarm", self.device), PREWARM_TIMEOUT_S, trusted=True)
                if (outcome.result or {}).get("prewarm") == "ok" and stub_files(cache):
                    write_atomic(marker, json.dumps({"triton": version}))
            self._stubs = stub_files(cache)

    # jobs ------------------------------------------------------------------------------------------------------
    def run(self, job: WorkerJob, timeout_s: float, trusted: bool = False, compile_timeout_s: float | None = None,
            cut_at: float | None = None) -> JobOutcome:
        """Run one job in its own process; never raises for anything the job does, nor when no worker can be made or
        given the job (an outcome with `unstarted`). Thread-safe. With `compile_timeout_s`, a worker whose stage says
        it has been compiling for longer is killed (status "compile_timeout"), whatever is left of `timeout_s`. Time
        waiting for a GPU memory slot (``job.memory_slots``) held by others is not counted. Still running at
        `cut_at` (``time.perf_counter()``: the search's budget), waiting for memory or not, the worker is killed
        (status "cancelled"; its stage says where it was cut)."""
        if not trusted:
            self._ensure_stubs()
        start = time.perf_counter()
        try:
            handle = (None if trusted else self._take_spare()) or self._fork(trusted)
        except OSError as exc:
            return JobOutcome("crashed", None, None, "", time.perf_counter() - start,
                              unstarted=f"no worker process could be made for the job: {exc}")
        result_path = handle.workdir / f"result-{uuid.uuid4().hex}.json"
        token = secrets.token_hex(16)  # the worker returns it with its result; candidate code never sees it
        try:
            job_file = handle.workdir / "job.json"
            try:  # the worker polls for it, and deletes it before running the job
                write_atomic(job_file, replace(job, result_path=str(result_path), token=token).to_json())
            except OSError as exc:
                if handle.zygote is not None:
                    handle.zygote.kill(handle)  # it would wait for its job forever
                return JobOutcome("crashed", None, None, "", time.perf_counter() - start, handle.pid,
                                  unstarted=f"the sandbox could not write the job for its worker: {exc}")
            if not trusted:
                try:
                    self._replenish()
                except OSError:
                    pass  # no spare for now: the next job forks its own worker (or reports why it cannot)
            memory = MemoryWait(job.gpu_lock, job.memory_slots, handle.pid, cut_at)
            locked = LockWait(job.gpu_lock, handle.pid, cap_s=timeout_s)
            return self._wait(handle, result_path, timeout_s, token, compile_timeout_s, memory, cut_at, locked)
        finally:
            result_path.unlink(missing_ok=True)
            shutil.rmtree(handle.workdir, ignore_errors=True)

    def _wait(self, handle: WorkerHandle, result_path: Path, timeout_s: float, token: str,
              compile_timeout_s: float | None = None, memory: MemoryWait | None = None,
              cut_at: float | None = None, locked: LockWait | None = None) -> JobOutcome:
        start = time.perf_counter()
        if cut_at is not None and not handle.forked.wait(max(min(cut_at - start, START_TIMEOUT_S), 0.0)):
            if time.perf_counter() >= cut_at:  # cut before its worker was even forked (a fork server starting)
                handle.zygote.kill(handle)  # forked later, it is killed then
                return JobOutcome("cancelled", None, None, "", time.perf_counter() - start, None,
                                  stage="waiting for its worker process to start")
        started = handle.forked.wait(max(START_TIMEOUT_S - (time.perf_counter() - start), 0.0))
        if not started:  # the zygote is stuck: restart it, its workers are lost
            with self._lock:
                if self._zygote is handle.zygote and self._zygote is not None:
                    self._zygote.stop()
        clock_from = max(start, handle.forked_at or start)  # a cold worker's zygote may still have been starting
        compiling = CompileClock(compile_timeout_s) if compile_timeout_s else None
        memory = memory if memory is not None and memory.active else None
        locked = locked if locked is not None and locked.active else None
        ended = ""  # why the sandbox killed it before its timeout: compile_timeout, cancelled
        while True:
            paused = (memory.paused_s if memory else 0.0) + (locked.paused_s if locked else 0.0)
            left = clock_from + timeout_s + paused - time.perf_counter()
            watched = compiling is not None or memory is not None or locked is not None
            wait = min(left, POLL_S) if watched else left
            if cut_at is not None:  # woken at the cut, to kill the worker there
                wait = min(wait, max(cut_at - time.perf_counter(), 0.0) + 0.01)
            finished = handle.exited.wait(max(wait, 0.0))
            if finished or left <= 0:
                break
            stage, now = self._stage(handle), time.perf_counter()
            if cut_at is not None and now >= cut_at:  # the search's budget is spent: cut, whatever it was doing
                ended = "cancelled"
                break
            if compiling is not None and compiling.overdue(stage, now):
                ended = "compile_timeout"
                break
            if locked is not None:
                locked.read(stage, now)
            if memory is not None:
                memory.read(stage, now)
                if memory.cut(stage, now):
                    ended = "cancelled"
                    break
        if not finished:
            handle.zygote.kill(handle)
            handle.exited.wait(KILL_WAIT_S)
        wall = time.perf_counter() - start
        tail = self._log_tail(handle)
        result = read_result(result_path, token) if finished else None
        if result is not None:
            warn_unconfined(result.get("worker", {}).get("confinement", {}).get("missing"))
        status = "finished" if result is not None else "crashed" if finished else ended or "timeout"
        unstarted = "" if started or result is not None else \
            f"the fork server did not start a worker within {START_TIMEOUT_S:g} s and was restarted"
        return JobOutcome(status, result, handle.code, tail, wall, handle.pid, handle.lost and finished,
                          self._stage(handle), unstarted=unstarted, compile_timeout_s=compile_timeout_s)

    @staticmethod
    def _stage(handle: WorkerHandle) -> str:
        """The worker's STAGE_FILE, read so that nothing candidate code puts there (a FIFO, a link, a huge file)
        can block or burden the thread waiting on the job."""
        try:
            fd = os.open(handle.stage_path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return ""
        try:
            return os.read(fd, 200).decode(errors="replace") if stat.S_ISREG(os.fstat(fd).st_mode) else ""
        except OSError:
            return ""
        finally:
            os.close(fd)

    def _log_tail(self, handle: WorkerHandle) -> str:
        try:
            tail = handle.log_path.read_bytes()[-LOG_TAIL_CHARS:].decode(errors="replace")
        except OSError:
            tail = ""
        if handle.lost and handle.zygote is not None:
            tail += "\n[fork server log]\n" + handle.zygote.log_tail(LOG_TAIL_CHARS)
        return tail

    def reset(self) -> bool:
        """Back to what a fresh sandbox is once its fork server is up, for another run (``fitness.workers.pool``):
        its idle spares killed (they ran no candidate code, but their environment and warm-up are the last run's)
        and their directories removed. True when the fork server is alive with no worker of its own left (no job
        running, none on its way); False when it is not worth keeping: then close it."""
        with self._lock:
            zygote, spares, self._pool = self._zygote, self._pool, []
            pending = self._pending
        for handle in spares:
            if handle.zygote is not None:
                handle.zygote.kill(handle)
        for handle in spares:
            handle.exited.wait(KILL_WAIT_S)
            shutil.rmtree(handle.workdir, ignore_errors=True)
        return (not self._closed and zygote is not None and not zygote.dead and not pending
                and zygote.in_flight == 0)

    def close(self) -> None:
        """Stop the zygote (every worker dies with it) and remove every private directory."""
        with self._lock:
            zygote, self._zygote, self._closed = self._zygote, None, True
            self._pool = []
        if zygote is not None:
            zygote.stop()
        shutil.rmtree(self.root, ignore_errors=True)
