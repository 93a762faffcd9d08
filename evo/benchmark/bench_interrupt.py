"""Ctrl-C of a bench ends the bench: no problem starts after it, and each search running then is interrupted once,
as Ctrl-C interrupts a run (it keeps its checkpoint and ends with exit code 130: its row says so, and a re-run of
the bench resumes it).

Each search runs in a session of its own (``start_new_session``), so a Ctrl-C in the terminal reaches the bench
alone, which passes exactly one SIGINT to each search it runs (a second, while a search unwinds, would cut its
clean-up short); a ``kill -INT`` of the bench's pid does the same. A search still dies with the bench however the
bench dies (``fitness.common.lifeline``).
"""
from __future__ import annotations

import signal
import subprocess
import threading


class BenchInterrupted(Exception):
    """The bench was interrupted; `rows`: slug -> the row of every task that has one (finished before, finished
    now, or interrupted), None for a task that did not start."""

    def __init__(self, rows: dict):
        super().__init__("the bench was interrupted")
        self.rows = rows


class Searches:
    """The searches a bench runs (one process each); ``interrupt`` stops the bench starting more and interrupts
    those running."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self.interrupted = False

    def start(self, command: list[str], **popen) -> subprocess.Popen | None:
        """The search's process, in a session of its own; None once the bench is interrupted (not started)."""
        with self._lock:
            if self.interrupted:
                return None
            proc = subprocess.Popen(command, start_new_session=True, **popen)
            self._running.add(proc)
            return proc

    def wait(self, proc: subprocess.Popen, timeout_s: float | None) -> int | None:
        """Its exit code (None: it ran past `timeout_s` and was killed)."""
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
        finally:
            with self._lock:
                self._running.discard(proc)

    def interrupt(self) -> None:
        with self._lock:
            if self.interrupted:
                return
            self.interrupted = True
            for proc in self._running:
                try:
                    proc.send_signal(signal.SIGINT)
                except ProcessLookupError:  # it has just ended
                    pass
