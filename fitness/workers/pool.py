"""Warm sandboxes shared by the runs of one process: a run leases a sandbox, and gives its fork server back at its
end instead of stopping it, so the next run in the process (a Hydra multirun's next job with the basic launcher, a
script or test calling several runs) skips the fork server's start (the torch and Triton imports and its warm-up;
its cost: docs/measurements.md).

What is shared is a fork server, which never runs candidate code (``fitness.workers.zygote``): every job still gets a
freshly forked worker in a private directory, and the spares of the last run are killed when it gives the sandbox
back (``Sandbox.reset``), so a lessee gets what a fresh sandbox is once its fork server is up. A sandbox is served
again only to a lease that would start an identical fork server: the same device, Python, OS confinement, trusted
cache and environment (as its workers see it: secrets never reach them and do not count, nor the variables a test
runner changes per test, ``RUNNER_VARIABLES``); the lessee's own environment and warm-up settings then apply to every
worker forked for it. A run that did not complete (an error, Ctrl-C) ends its lease with ``keep=False``: the sandbox
is stopped, as before pooling; so is one whose fork server died or still has a worker. ``close_all`` stops every
sandbox of the pool, leased or idle, and runs at the interpreter's exit; at most ``IDLE_LIMIT`` idle ones are kept
(the least recently used is stopped first).
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from pathlib import Path

from fitness.workers.sandbox import Sandbox
from fitness.workers.worker_env import is_secret_variable

log = logging.getLogger(f"kernelevo.{__name__}")

IDLE_LIMIT = 2  # idle sandboxes kept per process: each is a fork server holding torch and Triton (no CUDA)
RUNNER_VARIABLES = ("PYTEST_CURRENT_TEST",)  # set per test by pytest; read by nothing a fork server imports


def pool_key(device: str, trusted_cache_dir: Path | None, confine: bool, python: str, base_env: dict) -> tuple:
    """What makes two sandboxes' fork servers differ: a leased sandbox is served only to an equal key."""
    env = {k: v for k, v in base_env.items() if not is_secret_variable(k) and k not in RUNNER_VARIABLES}
    return (device, str(trusted_cache_dir) if trusted_cache_dir else None, bool(confine), python,
            tuple(sorted(env.items())))


class Lease:
    """A sandbox lent to one run: `sandbox`, and `warm` (its fork server was already up when lent)."""

    def __init__(self, pool: SandboxPool, key: tuple, sandbox: Sandbox, warm: bool):
        self.pool, self.key, self.sandbox, self.warm = pool, key, sandbox, warm
        self.ended = False

    def end(self, keep: bool) -> None:
        """Give the sandbox back for the next run (`keep`: the run completed) or stop it; once (later calls do
        nothing)."""
        if not self.ended:
            self.ended = True
            self.pool._end(self, keep)


class SandboxPool:
    """Sandboxes lent to runs and given back to be lent again (module doc). Thread-safe."""

    def __init__(self, idle_limit: int = IDLE_LIMIT):
        self.idle_limit = idle_limit
        self._lock = threading.Lock()
        self._idle: list[tuple[tuple, Sandbox]] = []  # least recently given back first
        self._leased: set[Sandbox] = set()

    def lease(self, device: str, trusted_cache_dir: Path | None = None, spares: int = 1, confine: bool = True,
              warm: dict | None = None, python: str = sys.executable, base_env: dict | None = None) -> Lease:
        """A sandbox with ``Sandbox``'s settings: an idle one whose fork server is the same (``pool_key``), with the
        lessee's environment, spares and warm-up settings, else a new one."""
        base_env = dict(os.environ if base_env is None else base_env)
        key = pool_key(device, trusted_cache_dir, confine, python, base_env)
        with self._lock:
            found = next((i for i in range(len(self._idle) - 1, -1, -1) if self._idle[i][0] == key), None)
            sandbox = self._idle.pop(found)[1] if found is not None else None
            if sandbox is not None:
                sandbox.base_env, sandbox.spares, sandbox.warm = base_env, max(int(spares), 0), warm
            else:
                sandbox = Sandbox(device, trusted_cache_dir=trusted_cache_dir, spares=spares, python=python,
                                  base_env=base_env, confine=confine, warm=warm)
            self._leased.add(sandbox)
        return Lease(self, key, sandbox, warm=found is not None)

    def _end(self, lease: Lease, keep: bool) -> None:
        sandbox, evicted = lease.sandbox, []
        with self._lock:
            self._leased.discard(sandbox)
        if keep and sandbox.reset():
            with self._lock:
                self._idle.append((lease.key, sandbox))
                while len(self._idle) > self.idle_limit:
                    evicted.append(self._idle.pop(0)[1])
        else:
            evicted.append(sandbox)
        for stopped in evicted:
            stopped.close()

    @property
    def idle(self) -> list[Sandbox]:
        """The sandboxes given back and not lent again, least recently given back first."""
        with self._lock:
            return [sandbox for _, sandbox in self._idle]

    def close_all(self) -> None:
        """Stop every sandbox of the pool, idle or leased (their fork servers and workers end)."""
        with self._lock:
            stopping = [sandbox for _, sandbox in self._idle] + list(self._leased)
            self._idle, self._leased = [], set()
        for sandbox in stopping:
            try:
                sandbox.close()
            except Exception as exc:  # noqa: BLE001 - at exit: stop the others all the same
                log.warning(f"a pooled sandbox did not close: {type(exc).__name__}: {exc}")


SANDBOXES = SandboxPool()  # the process's pool: the runs' evaluation services lease from it
atexit.register(SANDBOXES.close_all)


def close_all() -> None:
    """Stop every sandbox of the process's pool (``SANDBOXES``); the interpreter's exit does it too."""
    SANDBOXES.close_all()
