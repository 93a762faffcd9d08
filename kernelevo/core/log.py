"""What kernelevo tells its user as it works, through ``logging``: every module logs to a child of the ``kernelevo``
logger (``logging.getLogger(f"kernelevo.{__name__}")``; ``__name__`` alone under the project's namespace), and a
process's entry point -- the ``kernelevo`` command (``kernelevo.cli.main``), a Ray actor's constructor, the tests'
conftest -- installs the one handler with ``configure``: each record a line ``[kernelevo] message``, below WARNING on
stdout, from WARNING on stderr, written to the stream of that moment (a test's capture, a redirected stream). It does
not propagate to the root logger, so Hydra's job log (``commands.log``) stays as it was: written only when something
else logs. A library caller that installs nothing sees warnings only (Python's last-resort handler)."""
from __future__ import annotations

import logging
import sys

NAME = "kernelevo"
PREFIX = "[kernelevo] "


class Console(logging.Handler):
    """Writes a record as one line to sys.stdout (below WARNING) or sys.stderr, looked up when it is written."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging never raises into the caller
            self.handleError(record)


def configure(level: int = logging.INFO) -> logging.Logger:
    """The ``kernelevo`` logger with its one console handler (installed once per process) at `level`."""
    logger = logging.getLogger(NAME)
    if not any(isinstance(handler, Console) for handler in logger.handlers):
        handler = Console()
        handler.setFormatter(logging.Formatter(PREFIX + "%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return logger
