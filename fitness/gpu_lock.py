"""A lock per GPU, shared by every evaluation worker on the machine (an flock on a file).

Several workers may share one GPU so that compiling candidates (CPU-bound) overlaps; the work that touches the
GPU for correctness and timing is done under this lock, so one candidate's timing never shares the GPU with
another's kernels.
"""
from __future__ import annotations

import fcntl
from pathlib import Path


class DeviceLock:
    def __init__(self, path: str | None):
        self.path = path
        self._file = None

    def __enter__(self):
        if self.path:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a+")
            fcntl.flock(self._file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def lock_path(cache_dir: Path, device: str) -> str | None:
    """The lock file for a CUDA device (None on the CPU interpreter, where nothing is timed against a GPU)."""
    if not device.startswith("cuda"):
        return None
    index = device.split(":", 1)[1] if ":" in device else "0"
    return str(Path(cache_dir) / "locks" / f"gpu-{index}.lock")
