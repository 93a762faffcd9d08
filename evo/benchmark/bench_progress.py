"""What a bench says while a problem runs: its start (where, resumed or not, and its log file under the bench's
``logs/``), then its stage now and then: the last line of progress its run wrote to its log (``[kernelevo] ...``)
when it changed, so a problem that runs long is never silent (docs/measurements.md)."""
from __future__ import annotations

import threading
from pathlib import Path

STAGE_EVERY_S = 15.0  # how often a running problem's log is read for a new stage line
TAIL_BYTES = 65536  # how much of the log's end is read for its last progress line
TAG = "[kernelevo"  # a run's lines of progress: "[kernelevo] ...", "[kernelevo seed N] gen ..."


def start_line(name: str, gpu: str | None, resumed: bool, log: Path) -> str:
    where = f"GPU {gpu}" if gpu is not None else "the CPU interpreter"
    return f"[bench] {name}: {'resumed' if resumed else 'started'} on {where}; its log: {log}"


class StageWatch:
    """Prints a running problem's stage: the last progress line of its log past `offset` (what earlier runs wrote
    there is not its own), each time it changed, every STAGE_EVERY_S from `start` to `stop`."""

    def __init__(self, name: str, log: Path, offset: int = 0, every_s: float = STAGE_EVERY_S):
        self.name, self.log, self.offset, self.every_s = name, Path(log), offset, every_s
        self.said = ""
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="kernelevo-bench-stage")

    def stage(self) -> str:
        """The last progress line its run wrote so far ("" before its first)."""
        try:
            with open(self.log, "rb") as f:
                f.seek(max(self.offset, f.seek(0, 2) - TAIL_BYTES))  # its last lines: a long run's log grows
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return next((line.strip() for line in reversed(text.splitlines()) if line.startswith(TAG)), "")

    def poll(self) -> str | None:
        """The stage's line as the bench prints it when it changed since the last, else None."""
        stage = self.stage()
        if not stage or stage == self.said:
            return None
        self.said = stage
        return f"[bench] {self.name}: {stage.split('] ', 1)[-1]}"

    def _loop(self) -> None:
        while not self._halt.wait(self.every_s):
            line = self.poll()
            if line is not None:
                print(line, flush=True)

    def start(self) -> "StageWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread.is_alive():
            self._thread.join()
