"""Operating-system confinement of a candidate's worker, applied by the forked child before anything else runs.

* **Namespaces** (Linux ``unshare``): a new PID namespace (the worker is PID 1 of its own: it cannot see or signal
  the search, the fork server or other workers, and ``/proc`` is remounted so it shows only its own processes;
  when it ends, the kernel kills everything it started), a new mount namespace (for that ``/proc``), and a new
  network namespace with no interface up (no network at all, loopback included).
* **Filesystem**: every mount read-only (``mount_setattr``, Linux >= 5.12) except the worker's own directory (its
  HOME, TMPDIR and caches, where its result is written too) and, for trusted jobs, their persistent cache; a private
  tmpfs on ``/dev/shm``. Device nodes stay usable (the GPU's included).
* **Resource limits**: no core dumps; no file larger than ``MAX_FILE_BYTES``.

What the kernel refuses (no user namespaces in a container, no privilege) is skipped, and the worker records what
it got under ``confinement`` in its result; the sandbox warns once, loudly, when a mechanism is missing.
Not (yet) enforced here: an unprivileged user, limits on memory and processes.

The PID namespace applies to children of the caller, so the child forks once more: the grandchild becomes PID 1
and the worker; the child waits for it and leaves the way it left (same exit code, or killed by the same signal),
so the fork server sees one process that behaves as the worker did.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1  # x86-64
PR_SET_PDEATHSIG = 1
MAX_FILE_BYTES = 8 << 30
WANTED = ("pid", "mount", "network", "filesystem")


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))


def _mirror_exit(pid: int) -> None:
    """In the outer child: wait for the worker and leave as it left."""
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: die of the same one, so the fork server reports it as such
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def _set_read_only(libc, path: str, read_only: bool, recursive: bool) -> None:
    attr = MountAttr(attr_set=MOUNT_ATTR_RDONLY) if read_only else MountAttr(attr_clr=MOUNT_ATTR_RDONLY)
    _call(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), AT_RECURSIVE if recursive else 0,
                       ctypes.byref(attr), ctypes.sizeof(attr)), f"mount_setattr {path}")


def read_only_except(libc, writable: list[str]) -> None:
    """Every mount read-only but the writable directories (each bound onto itself first: a mount of its own) and
    a private /dev/shm."""
    for path in writable:
        _call(libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind {path}")
    _set_read_only(libc, "/", True, recursive=True)
    try:
        for path in writable:
            _set_read_only(libc, path, False, recursive=False)
    except OSError:  # never leave a worker unable to write its own directory: back to writable, and say so
        _set_read_only(libc, "/", False, recursive=True)
        raise
    if os.path.isdir("/dev/shm"):
        _call(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1g"), "mount /dev/shm")


def confine(writable: list[str] = ()) -> dict:
    """Enter new namespaces and limits; returns {"enforced": [...], "missing": {mechanism: why}}. In the namespaced
    case this forks: only the worker (PID 1 of the new namespace) returns; its parent mirrors its exit.
    `writable`: the directories that stay writable (the worker's own; a trusted job's cache)."""
    libc, enforced, missing = _libc(), [], {}
    try:
        limit_resources()
        enforced.append("limits")
    except (OSError, ValueError) as exc:
        missing["limits"] = str(exc)
    try:
        _call(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET), "unshare")
    except OSError as exc:
        missing.update({name: str(exc) for name in WANTED})
        return {"enforced": enforced, "missing": missing}
    enforced.append("network")
    try:  # our mounts stay ours: nothing mounted here reaches the host
        _call(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    except OSError as exc:
        missing["mount"] = str(exc)
    pid = os.fork()
    if pid:
        _mirror_exit(pid)  # never returns
    _call(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL), "prctl")  # the worker dies with its outer process
    enforced.append("pid")
    if "mount" not in missing:
        try:
            _call(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
            enforced.append("mount")
        except OSError as exc:
            missing["mount"] = f"{exc}: /proc still shows the host's processes"
        try:
            read_only_except(libc, [str(p) for p in writable])
            enforced.append("filesystem")
        except OSError as exc:
            missing["filesystem"] = f"{exc}: the worker can write outside its directory"
    else:
        missing["filesystem"] = "no mount namespace"
    return {"enforced": enforced, "missing": missing}
