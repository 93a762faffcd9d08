"""An exclusive claim on a run (or bench) directory, held for the life of the process that runs there.

Two commands started together into one directory would both find it free and mix their stores; the claim makes
that impossible: an ``fcntl.flock`` on ``CLAIM_FILE`` in the directory, taken (non-blocking) before the command
writes anything there, held until the command ends. The kernel drops the lock when its process dies, however it
dies (``kill -9`` included): a lock file left by a dead process blocks nobody. Python opens the file
non-inheritable, so the processes a run starts (its fork server, Inductor's compile workers) do not hold it.

The claim also remembers what the directory held before it (``Claim.undo``): a run that fails before its first
evaluation puts the directory back as it found it (removed, when the claim made it), so nothing blocks running the
same directory again.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path

from kernelevo.core.errors import KernelevoError

CLAIM_FILE = ".kernelevo.lock"


class DirectoryInUse(KernelevoError):
    """Another live process holds the directory's claim; the message names it and the way out."""


class Claim:
    """``with Claim(folder, fix):`` -- the folder (made if missing) is this process's until the block ends.
    DirectoryInUse, naming the process holding it and `fix`, when another one does; the loser writes nothing."""

    def __init__(self, folder: Path, fix: str = "wait for it to end", what: str = "kernelevo"):
        self.folder, self.fix, self.what = Path(folder).absolute(), fix, what
        self.path = self.folder / CLAIM_FILE
        self._fd: int | None = None
        self._before: set[str] | None = None  # the entries the folder held before (None: the claim made it)

    def __enter__(self) -> "Claim":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        existed = self.folder.is_dir()
        before = set(os.listdir(self.folder)) if existed else None
        self.folder.mkdir(parents=True, exist_ok=True)
        for _ in range(5):  # a holder that just released removed the file: open the new one
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # non-inheritable (PEP 446)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 400).decode(errors="replace").strip()
                os.close(fd)
                raise DirectoryInUse(f"{self.folder} is in use by another kernelevo process ({holder or 'starting'})"
                                     f"; {self.fix}") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # locked a file its holder removed on release: not the claim any more
        else:
            raise DirectoryInUse(f"{self.folder}: could not claim it ({self.path} keeps changing); {self.fix}")
        self._fd, self._before = fd, before
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}, {self.what}, since {time.strftime('%H:%M:%S')}".encode())

    def release(self) -> None:
        """Give the directory back (the lock file removed first, so a process waiting on it opens a new one)."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None

    def undo(self) -> None:
        """Put the directory back as the claim found it (removed when the claim made it), and give it back: for a
        run that failed before anything of it was worth keeping."""
        if self._fd is None:
            return
        if self._before is None:
            shutil.rmtree(self.folder, ignore_errors=True)
        else:
            for name in set(os.listdir(self.folder)) - self._before - {CLAIM_FILE}:
                entry = self.folder / name
                shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() and not entry.is_symlink() \
                    else entry.unlink(missing_ok=True)
        self.release()
