"""The capture process (``capture.py``), watched while it runs: it writes its output file after each capture (the
default, then each variant: name -> what it captured), so what finished is read as it arrives and kept whatever
happens after it. The default capture has its own limit; the variants after it share a budget
(``settings.CaptureSettings``); past either the process (and what it started) is stopped."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

POLL_S = 0.2  # how often the output file is read while the process runs
OUTPUT_TAIL = 4000  # characters of the process's output kept for an error


@dataclass
class Watched:
    """What the capture process left: the captures in the order they arrived, and how it ended."""
    captured: dict = field(default_factory=dict)  # name -> what it captured (or {"error": why}: Inductor failed)
    returncode: int | None = None  # None: stopped at its limit
    stopped_after_s: float = 0.0  # the limit it was stopped at (seconds from the start of its phase)
    output: str = ""  # the tail of the process's stdout and stderr


def watch(command: list[str], out_file: Path, names: list[str], first_limit_s: float | None, budget_s: float,
          arrived: Callable[[str, dict], None] | None = None, **popen) -> Watched:
    """Run `command` (it writes `out_file` whole after each of `names`, in order, each capture with its
    ``finished_at``) until it ends or its time is up: `first_limit_s` from its start until ``names[0]`` is written
    (the default capture's own limit; None: the default is not among `names`), then `budget_s` for the rest, from the
    end of ``names[0]``'s capture (from the start where `first_limit_s` is None). A capture of the rest that finished
    after the budget's end is not taken (read late or not, it did not finish within it). `arrived` is called with each
    name and what it captured as soon as it is read."""
    watched = Watched()
    log_file = out_file.with_name(out_file.stem + ".log")
    limit = budget_s if first_limit_s is None else first_limit_s
    with open(log_file, "w") as log:
        deadline = time.time() + limit  # the child's clock: each capture says when it finished (time.time())
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **popen)
        try:
            while True:
                try:
                    proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.time())))
                except subprocess.TimeoutExpired:
                    pass
                late = False
                for name, got in _read(out_file).items():
                    if name not in names or name in watched.captured:
                        continue
                    finished = got.pop("finished_at", None)
                    if first_limit_s is not None and name == names[0]:  # the rest's budget starts at its end
                        deadline, limit = (finished or time.time()) + budget_s, budget_s
                    elif finished is not None and finished > deadline:
                        late = True
                        continue
                    watched.captured[name] = got
                    if arrived is not None:
                        arrived(name, got)
                if late or (proc.returncode is None and time.time() >= deadline):
                    watched.stopped_after_s = limit
                    break
                if proc.returncode is not None:
                    watched.returncode = proc.returncode
                    break
        finally:
            _stop(proc)
    watched.output = log_file.read_text(errors="replace")[-OUTPUT_TAIL:]
    return watched


def _read(out_file: Path) -> dict:
    """The output file as written last (written whole: ``os.replace``); {} before its first write."""
    try:
        got = json.loads(out_file.read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _stop(proc: subprocess.Popen) -> None:
    """The process and the processes it started (its session: Inductor's compile workers), killed if still running."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
