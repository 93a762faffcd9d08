"""A run's failure as a record (``RunFailure``): its message, its exit status, its kind (a user's error, a bug, an
interrupt) and, for a bug, its traceback's last lines. The one form of "why a run failed", written by the command
that ran it (``kernelevo.cli``), read by what drives runs (``evo.benchmark``), never parsed out of a log:

- a bench names a file for it outside the run directory, in the run's environment (``FAILURE_FILE``): a run that
  fails with a user's error before its first evaluation removes its run directory (``evo.records.claim.Claim.undo``);
- a sweep's failed job keeps it in its folder (``FAILED_FILE``, ``keep``), its row in the sweep's tables.
"""
from __future__ import annotations

import json
import os
import traceback as tb
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from kernelevo.core.records import from_record
from evo.reports.outcome import SUMMARY_FILE
from fitness.common.atomic import write_atomic

FAILURE_FILE = "KERNELEVO_FAILURE_FILE"  # environment: where this process's command writes its failure, if it fails
FAILED_FILE = "failed.json"  # a sweep's failed job: its record in its folder
TRACEBACK_LINES = 12  # a bug's traceback: its last lines kept


class FailureKind(str, Enum):
    USER = "user error"  # a KernelevoError (or an LLM that fails), said in one line: the input to fix
    BUG = "bug"  # any other exception: its traceback says where
    INTERRUPTED = "interrupted"  # Ctrl-C or a signal: a resume continues it


@dataclass(frozen=True)
class RunFailure:
    message: str
    status: int | None = None  # the command's exit status (None: unknown, a record of an older version)
    kind: FailureKind | None = None  # None: unknown (an older version's record)
    traceback: str = ""  # a bug's traceback, its last TRACEBACK_LINES lines
    problem: str = ""  # the problem the run searched, where known (a sweep's job)

    def __post_init__(self):
        if self.kind is not None and not isinstance(self.kind, FailureKind):
            object.__setattr__(self, "kind", FailureKind(self.kind))

    @classmethod
    def of_bug(cls, exc: BaseException, status: int = 1, problem: str = "") -> "RunFailure":
        """A bug's record: the exception's type and message, its traceback's last lines."""
        lines = "".join(tb.format_exception(type(exc), exc, exc.__traceback__)).rstrip().splitlines()
        return cls(f"{type(exc).__name__}: {exc}", status, FailureKind.BUG, "\n".join(lines[-TRACEBACK_LINES:]),
                   problem)

    @property
    def said(self) -> str:
        """The failure as a table's row says it: the message, a bug marked as one with the line it was raised at."""
        if self.kind is not FailureKind.BUG:
            return self.message
        where = next((line.strip() for line in reversed(self.traceback.splitlines())
                      if line.strip().startswith("File ")), "")
        return f"bug: {self.message}" + (f" ({where})" if where else "")

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": None if self.kind is None else self.kind.value}

    @classmethod
    def from_dict(cls, data: dict, where: str = "a run's failure record") -> "RunFailure":
        return from_record(cls, data, where)

    def write(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path) -> "RunFailure | None":
        """The record written at `path`, or None: none there."""
        path = Path(path)
        return cls.from_dict(json.loads(path.read_text()), str(path)) if path.is_file() else None

    def keep(self, run_dir: Path) -> None:
        """A sweep's failed job: its record in its folder (its row in the sweep's tables)."""
        self.write(Path(run_dir) / FAILED_FILE)

    @classmethod
    def kept(cls, run_dir: Path) -> "RunFailure | None":
        """A sweep job's record (``keep``), or None: none, or an outcome written since (the run was continued,
        ``kernelevo resume``)."""
        path, outcome = Path(run_dir) / FAILED_FILE, Path(run_dir) / SUMMARY_FILE
        if not path.is_file() or outcome.is_file() and outcome.stat().st_mtime > path.stat().st_mtime:
            return None
        return cls.read(path)


def asked_file() -> Path | None:
    """The file this process's command writes its failure into, where whoever started it asked for one
    (``FAILURE_FILE``); taken out of the environment, so the processes the command starts do not write it."""
    path = os.environ.pop(FAILURE_FILE, "")
    return Path(path) if path else None
