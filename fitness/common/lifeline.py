"""A child process that dies with the process that started it, even when that one is killed with SIGKILL.

A killed process runs no handler, so its children must notice on their own. The parent starts the child with
``env=lifeline_env()`` (its own pid in ``KERNELEVO_PARENT_PID``); the child calls ``arm()`` first thing, which asks
the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``, Linux; elsewhere a thread that polls the
parent pid) and ends at once when the parent is already gone (it died before the signal was armed). What the child
started dies with it the way it already does: a run's fork server ends on EOF of its command pipe and kills its
workers, which get SIGKILL when it dies (``fitness.workers.zygote``).

Caveat of PR_SET_PDEATHSIG: the "parent" is the thread that forked the child, so the parent must start the child
from a thread that lives as long as the child (``subprocess.run`` in the thread that waits for it, as the bench does).
The variable is removed from the child's environment once read: the child's own children do not inherit it.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

PARENT_PID = "KERNELEVO_PARENT_PID"
PR_SET_PDEATHSIG = 1
POLL_S = 1.0  # the watchdog's period where prctl is not available
INTERRUPTED_EXIT = 130  # how a kernelevo process interrupted by Ctrl-C ends (128 + SIGINT, as a shell reports one)


def lifeline_env(env: dict | None = None) -> dict:
    """`env` (default: this process's environment) for a child that is to die with this process (it calls arm())."""
    return {**(os.environ if env is None else env), PARENT_PID: str(os.getpid())}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_S)
    _die()


def arm() -> bool:
    """In a child started with lifeline_env(): die when the parent dies. False (nothing done) in any other process."""
    value = os.environ.pop(PARENT_PID, "")
    if not value.isdigit():
        return False
    parent = int(value)
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes

        armed = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL) == 0
    if os.getppid() != parent:  # the parent died before the death signal was armed: adopted by another process
        _die()
    if not armed:
        threading.Thread(target=_watch, args=(parent,), name="kernelevo-lifeline", daemon=True).start()
    return True
