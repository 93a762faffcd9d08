"""Files written whole or not at all: a reader (the worker polling for its job, the sandbox reading a result or a
stage, a resumed bench) finds the old content or the new, never part of it. The one home of the temporary file +
``os.replace`` idiom."""
from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` through a temporary file beside it, then replace `path` with it (atomic on one file
    system). Concurrent writers of one path are harmless, the last replace wins; a failed write leaves no temporary
    file. The file gets the permissions of a plain ``open`` (the umask's)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
