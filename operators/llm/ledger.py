"""What the LLM client keeps between calls: its errors, the request hash, the reply cache on disk with a lock per
request in flight, the call/cost budget and the count of failed calls in a row (``operators/llm/client.py`` sends; this
module remembers and counts)."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from kernelevo.core.errors import KernelevoError

logger = logging.getLogger("operators.llm.client")


UNAVAILABLE = "LLM unavailable"  # how the stop reason of a run that its LLM failed begins


class LLMError(KernelevoError):
    """An LLM call failed after its retries (the message names the model, the URL and the cause, never the key).

    ``kind`` says what failed: key (no key to send), connection, timeout, auth (401/403), not_found (404: model or
    route), quota, rate_limit, server (5xx), request (other 4xx), or "" (anything else); ``status``: the HTTP status
    when there was one."""

    def __init__(self, message: str, kind: str = "", status: int | None = None):
        super().__init__(message)
        self.kind, self.status = kind, status


class LLMBudgetExceeded(LLMError):
    """The call or cost budget is spent; raised before a request is sent."""


class LLMCut(LLMError):
    """The wall-time deadline passed: the request was not sent, or its wait was cut short (no failure of the LLM)."""


class LLMUnavailable(LLMError):
    """Too many calls in a row failed: the LLM is taken for down, and no further request is sent."""


def canonical(payload: dict) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def request_hash(payload: dict) -> str:
    """sha256 of the canonical JSON of the full request."""
    return hashlib.sha256(canonical(payload).encode()).hexdigest()


# -------------------------------------------------------------------------------------------------- cache


class ResponseCache:
    """The replies on disk by request hash, in a ``diskcache.Cache`` (SQLite: safe for threads and for processes
    sharing the directory; never evicts), each entry the JSON text of {"request": ..., "reply": ...} (nothing is
    pickled). ``hold(key)``: one lock per request across threads and processes, so identical requests in flight are
    sent once (the second caller waits for the first, then finds its reply here; a parallel run, or two runs sharing
    ``llm.cache_dir``, get the same replies as a sequential rerun that replays the cache). The lock is a
    ``filelock.FileLock`` under ``locks/``: the operating system releases it should its holder die.

    diskcache is imported, and the directory made, on first use: a run without LLM calls needs neither.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self._cache = None
        self._lock = threading.Lock()

    def _opened(self):
        with self._lock:
            if self._cache is None:
                try:
                    import diskcache
                except ImportError as exc:
                    raise LLMError(f"the LLM reply cache (llm.cache_dir={self.directory}) needs diskcache, which is "
                                   f"not installed: pip install diskcache (or set llm.cache_dir=null)") from exc
                self._cache = diskcache.Cache(str(self.directory), eviction_policy="none")
        return self._cache

    def __len__(self) -> int:
        return len(self._opened())

    def get(self, key: str, payload: dict) -> dict | None:
        """The stored reply fields for this request, or None (missing, unreadable or a different request)."""
        try:
            text = self._opened().get(key)
            entry = None if text is None else json.loads(text)
        except (TypeError, ValueError, OSError, sqlite3.Error) as exc:
            logger.warning("LLM cache: ignoring unreadable entry %s (%s)", key[:12], type(exc).__name__)
            return None
        if entry is None:
            return None
        if canonical(entry.get("request", {})) != canonical(payload):
            logger.warning("LLM cache: entry %s belongs to another request; ignoring it", key[:12])
            return None
        return entry.get("reply")

    def put(self, key: str, payload: dict, reply: dict) -> None:
        """Store a reply (concurrent writers of the same key are harmless: the last wins)."""
        self._opened().set(key, json.dumps({"request": payload, "reply": reply}, ensure_ascii=False, default=str))

    @contextmanager
    def hold(self, key: str):
        """The request's lock, held by one thread of one process at a time (none, with a warning, where no lock file
        can be made: identical requests may then be sent twice)."""
        from filelock import FileLock

        path = self.directory / "locks" / f"{key}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(path)
            lock.acquire()
        except OSError as exc:
            logger.warning("LLM cache: no lock for request %s (%s); it may be sent twice", key[:12], exc)
            yield
            return
        try:
            yield
        finally:
            lock.release()


# ------------------------------------------------------------------------------------------------- budget


class Allowance:
    """The calls one child has reserved, per role (``Budget.child``): its own calls draw on them first, so a planned
    child is always coded and its debugger's tries are there. What it does not use goes back to the budget."""

    def __init__(self, calls: dict):
        self.calls = {role: n for role, n in calls.items() if n > 0}
        self.used: dict = {}

    @property
    def held(self) -> int:
        return sum(self.calls.values())

    def take(self, role: str) -> bool:
        """Draw one call for `role` from its own reservation, else (for any role but the debugger) from the
        debugger's: never from the coder's, so planner retries cannot leave a plan uncoded."""
        for source in (role, "debugger"):
            if self.calls.get(source, 0) > 0:
                self.calls[source] -= 1
                self.used[role] = self.used.get(role, 0) + 1
                return True
        return False

    def give_back(self, role: str) -> None:
        """A drawn call gave no reply: it is the child's again."""
        self.calls[role] = self.calls.get(role, 0) + 1
        self.used[role] -= 1

    def left(self, role: str) -> int:
        return self.calls.get(role, 0)


ALLOWANCE: ContextVar[Allowance | None] = ContextVar("kernelevo_llm_allowance", default=None)


class Budget:
    """Thread-safe count of calls and their cost, with optional limits checked before sending. Every call counts,
    answered by the server or replayed from the cache (a replay costs nothing): a rerun or a replayed sweep makes the
    same calls within the same budget. Children reserve their calls (``child``) before they start."""

    def __init__(self, max_calls: int | None = None, max_cost_usd: float | None = None):
        self.max_calls = max_calls
        self.max_cost_usd = max_cost_usd
        self._lock = threading.Condition()
        self._calls = 0
        self._paid = 0
        self._cost = 0.0
        self._in_flight = 0
        self._held = 0  # calls reserved by children in flight and not yet drawn

    def _free(self) -> int | None:
        return None if self.max_calls is None else self.max_calls - self._calls - self._in_flight - self._held

    def reserve(self, model: str, role: str = "") -> bool:
        """Claim one call, or raise LLMBudgetExceeded (calls in flight count as made). A call of a child with an
        allowance (``child``) draws on it first; returns whether it did."""
        allowance = ALLOWANCE.get()
        with self._lock:
            if allowance is not None and allowance.take(role):
                self._held -= 1
                self._in_flight += 1
                return True
            free = self._free()
            if free is not None and free <= 0:
                raise LLMBudgetExceeded(f"LLM call budget spent ({self.max_calls} calls); not calling {model}")
            if self.max_cost_usd is not None and self._cost >= self.max_cost_usd:
                raise LLMBudgetExceeded(f"LLM cost budget spent (${self._cost:.4f} of ${self.max_cost_usd:.4f});"
                                        f" not calling {model}")
            self._in_flight += 1
            return False

    def commit(self, cost_usd: float, cached: bool = False) -> None:
        """A reserved call was answered (by the server at this cost, or from the cache)."""
        with self._lock:
            self._in_flight -= 1
            self._calls += 1
            self._paid += not cached
            self._cost += cost_usd
            self._lock.notify_all()

    def release(self, role: str = "", drawn: bool = False) -> None:
        """A reserved call failed: it gave no reply and is not counted (one drawn from a child's allowance is the
        child's again)."""
        with self._lock:
            self._in_flight -= 1
            allowance = ALLOWANCE.get()
            if drawn and allowance is not None:
                allowance.give_back(role)
                self._held += 1
            self._lock.notify_all()

    @contextmanager
    def child(self, needs: dict, least: int, check=lambda: None, fallback: dict | None = None):
        """Reserve a child's calls (`needs`: role -> calls, in order of importance) before it starts: wait while
        children in flight hold what it needs (what they leave goes back); when none holds any and fewer are left,
        the child gets what is left if that is at least `least` (its last roles cut first), else the smaller child
        `fallback` (role -> calls: a child coded without a plan) if what is left covers it, so no call is left
        stranded; else LLMBudgetExceeded: the budget cannot carry another child. `check()` is called while waiting
        (it raises to stop the wait)."""
        wanted = sum(needs.values())
        with self._lock:
            while True:
                free = self._free()
                if self.max_cost_usd is not None and self._cost >= self.max_cost_usd:
                    raise LLMBudgetExceeded(f"LLM cost budget spent (${self._cost:.4f} of "
                                            f"${self.max_cost_usd:.4f}): no child can start")
                if free is None or free >= wanted or (self._held == 0 and self._in_flight == 0):
                    break
                self._lock.wait(0.2)
                check()
            if free is not None and free < least:
                smallest = sum(fallback.values()) if fallback else least
                if not fallback or free < smallest:
                    raise LLMBudgetExceeded(f"LLM call budget spent: {self.max_calls - free} of {self.max_calls} "
                                            f"calls made or held, {free} left, a child needs at least "
                                            f"{min(least, smallest)}")
                needs, wanted = fallback, smallest
            grant, left = {}, wanted if free is None else min(free, wanted)
            for role, n in needs.items():
                grant[role] = min(n, left)
                left -= grant[role]
            allowance = Allowance(grant)
            self._held += allowance.held
        token = ALLOWANCE.set(allowance)
        try:
            yield allowance
        finally:
            ALLOWANCE.reset(token)
            with self._lock:
                self._held -= allowance.held
                self._lock.notify_all()

    @property
    def totals(self) -> dict:
        """Calls made (replays from the cache included: what the budget counts), those paid, and their cost."""
        with self._lock:
            return {"calls": self._calls, "cost_usd": self._cost}

    @property
    def paid(self) -> int:
        with self._lock:
            return self._paid


# ----------------------------------------------------------------------------------------------- failures


class FailureCount:
    """Thread-safe count of failed calls in a row (a reply resets it); at ``limit`` the LLM is down for good: every
    later call, and every retry waiting in a backoff (``down``), raises LLMUnavailable naming the last failure."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.down = threading.Event()
        self._lock = threading.Lock()
        self._in_a_row = 0
        self._reason = ""

    def check(self) -> None:
        """LLMUnavailable once the LLM is down."""
        if self.down.is_set():
            raise LLMUnavailable(self._reason, kind="unavailable")

    def succeeded(self) -> None:
        with self._lock:
            self._in_a_row = 0

    def failed(self, error: LLMError) -> LLMError:
        """Count a failed call: the error to raise, `error` itself or, at the limit, LLMUnavailable."""
        with self._lock:
            self._in_a_row += 1
            count = self._in_a_row
            if self.limit is not None and count >= self.limit and not self.down.is_set():
                self._reason = f"{UNAVAILABLE}: {count} calls in a row failed; the last: {error}"
                self.down.set()
        of = f" of {self.limit}" if self.limit is not None else ""
        logger.warning("%s (%d%s failed calls in a row)", error, count, of)
        if self.down.is_set():
            return LLMUnavailable(self._reason, kind="unavailable")
        return error
