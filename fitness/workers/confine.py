"""Operating-system confinement of a candidate's worker, applied by the forked child before anything else runs.

* **Namespaces** (Linux ``unshare``): a new PID namespace (the worker is PID 1 of its own: it cannot see or signal
  the search, the fork server or other workers, and ``/proc`` is remounted so it shows only its own processes;
  when it ends, the kernel kills everything it started), a new mount namespace (for that ``/proc``), and a new
  network namespace with no interface up (no network at all, loopback included).
* **Filesystem**: every mount read-only (``mount_setattr``, Linux >= 5.12) except the worker's own directory (its
  HOME, TMPDIR and caches, where its result is written too) and, for trusted jobs, their persistent cache; a private
  tmpfs on ``/dev/shm``; the worker's own ``/proc`` (CUDA writes there when it starts) with its kernel-wide parts
  (``/proc/sys``, ``sysrq-trigger``, ...) read-only. Device nodes stay usable (the GPU's included).
* **Resource limits**: no core dumps; no file larger than ``MAX_FILE_BYTES``; at most ``MAX_CPU_SECONDS`` of CPU;
  on the CPU interpreter at most ``MAX_ADDRESS_BYTES`` of address space (not on a GPU: CUDA reserves address
  space far beyond any memory, so there memory is bounded by the device and the job's timeout).
* **An unprivileged user** (``drop_privileges``, when a candidate's job arrives): a worker started as root becomes
  a user id of its own (``UID_BASE`` + its host pid), with no groups and no capabilities, owning only its
  directory, and limited to ``MAX_PROCESSES`` processes and threads; so besides the read-only view it cannot read
  files that other users cannot. Where something it must read (Python's paths, the repository, the problem file,
  the GPU lock) lies in a directory closed to other users (root's home, say), that directory is covered by an
  empty read-only tmpfs with only those paths bound back (``open_the_way``): the rest of it, keys included,
  is not in the worker's view at all. When that fails, the worker stays root and says why.

What the kernel refuses (no user namespaces in a container, no privilege) is skipped, and the worker records what
it got under ``confinement`` in its result; the sandbox warns once, loudly, when a mechanism is missing.

The PID namespace applies to children of the caller, so the child forks once more: the grandchild becomes PID 1
and the worker; the child waits for it and leaves the way it left (same exit code, or killed by the same signal),
so the fork server sees one process that behaves as the worker did.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

from fitness.common.gpu_lock import lock_files

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x4000, 0x40000
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1  # x86-64
PR_SET_PDEATHSIG = 1
MAX_FILE_BYTES = 8 << 30
MAX_CPU_SECONDS = 3600
MAX_ADDRESS_BYTES = 64 << 30
MAX_PROCESSES = 1024
UID_BASE, UID_SPAN = 200_000, 100_000
WANTED = ("pid", "mount", "network", "filesystem")
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")  # kernel-wide settings


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _call(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _lower(limit: int, value: int) -> None:
    """Set a resource limit to `value`, or keep the current one where it is already lower."""
    soft, hard = resource.getrlimit(limit)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(limit, (value, value))


def limit_resources(device: str = "cuda") -> None:
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_FSIZE, MAX_FILE_BYTES)
    _lower(resource.RLIMIT_CPU, MAX_CPU_SECONDS)
    if not device.startswith("cuda"):
        _lower(resource.RLIMIT_AS, MAX_ADDRESS_BYTES)


def closed_to_others(path: str) -> str | None:
    """The first directory on `path` (the path included) that other users cannot enter or read, or None."""
    current = os.path.abspath(path)
    while True:
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return None  # nothing there: nothing to read either
        needed = 0o005 if os.path.isdir(current) else 0o004
        if mode & needed != needed:
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def open_the_way(libc, readable: list[str], rounds: int = 4) -> list[str]:
    """Where a directory closed to other users lies on the way to something the worker must read (Python in
    root's home, say), mount a read-only tmpfs (mode 0755) over it and bind back only the paths needed: the rest
    of that directory (keys, say) leaves the worker's view. Needs a mount namespace of its own and root; returns
    the directories masked."""
    masked = []
    for _ in range(rounds):
        blocked: dict = {}
        for path in readable:
            closed = closed_to_others(path)
            if closed:
                blocked.setdefault(closed, []).append(os.path.abspath(path))
        if not blocked:
            break
        for top, paths in blocked.items():
            outermost = [p for p in sorted(set(paths)) if not any(p.startswith(q + os.sep) for q in paths)]
            fds = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in outermost]  # reachable once covered
            _call(libc.mount(b"tmpfs", top.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"),
                  f"mount tmpfs over {top}")
            for path, fd in fds:
                if os.path.isdir(f"/proc/self/fd/{fd}"):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    open(path, "a").close()
                _call(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
                      f"bind {path}")
                os.close(fd)
            _set_read_only(libc, top, True, recursive=True)
            masked.append(top)
    return masked


def drop_privileges(uid: int, readable: list[str], writable: list[str]) -> str:
    """Become `uid` (no groups, no capabilities) when running as root, owning the `writable` directories; returns
    what was done. OSError naming the obstacle when something in `readable` is closed to other users."""
    if os.geteuid() != 0:
        return f"already unprivileged (uid {os.geteuid()})"
    masked = open_the_way(_libc(), readable)
    for path in readable:
        closed = closed_to_others(path)
        if closed:
            raise OSError(f"{closed} is closed to other users (needed: {path}); make it readable, or run as a "
                          f"user other than root")
    for top in writable:
        for root, dirs, files in os.walk(top):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, uid, uid)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # a change of credentials clears the parent-death signal: re-arm it, or a killed worker's PID 1 lives on
    _call(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL), "prctl")
    _lower(resource.RLIMIT_NPROC, MAX_PROCESSES)  # counted per user: this worker's uid is its own
    return f"uid {uid}" + (f"; masked {', '.join(masked)} but for what it needs" if masked else "")


def become_unprivileged(job, confinement: dict | None) -> None:
    """Before a candidate's code exists: a user id of the worker's own (`drop_privileges`), recorded
    in `confinement` as enforced "user", or missing with the reason."""
    if not confinement or "uid" not in confinement:
        return
    problem, sandbox_root = job.problem, os.path.dirname(os.getcwd())
    needed = (*sys.path, sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), problem.get("path"),
              problem.get("seed_path"), *lock_files(job.gpu_lock, job.memory_slots),
              *job.readable)
    readable = [p for p in needed
                if p and os.path.exists(p) and not os.path.abspath(p).startswith(sandbox_root + os.sep)]
    try:
        confinement["user"] = drop_privileges(confinement["uid"], readable, [os.getcwd()])
        confinement["enforced"].append("user")
    except OSError as exc:
        confinement["missing"]["user"] = str(exc)


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
    """Every mount read-only but the writable directories (each bound onto itself first: a mount of its own), a
    private /dev/shm and the worker's own /proc, whose kernel-wide parts stay read-only (``PROC_READ_ONLY``):
    CUDA's initialisation fails with error 304 on a read-only /proc (docs/measurements.md)."""
    for path in writable:
        _call(libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind {path}")
    _set_read_only(libc, "/", True, recursive=True)
    try:
        for path in writable:
            _set_read_only(libc, path, False, recursive=False)
    except OSError:  # never leave a worker unable to write its own directory: back to writable, and say so
        _set_read_only(libc, "/", False, recursive=True)
        raise
    if os.path.isdir("/proc/self"):
        _set_read_only(libc, "/proc", False, recursive=False)
        for path in PROC_READ_ONLY:
            if os.path.exists(path):
                _call(libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind {path}")
                _set_read_only(libc, path, True, recursive=True)
    if os.path.isdir("/dev/shm"):
        _call(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1g"), "mount /dev/shm")


def confine(writable: list[str] = (), device: str = "cuda") -> dict:
    """Enter new namespaces and limits; returns {"enforced": [...], "missing": {mechanism: why}, "uid": the user
    id `drop_privileges` will take}. In the namespaced case this forks: only the worker (PID 1 of the new
    namespace) returns; its parent mirrors its exit. `writable`: the directories that stay writable (the worker's
    own; a trusted job's cache)."""
    libc, enforced, missing = _libc(), [], {}
    uid = UID_BASE + os.getpid() % UID_SPAN  # the host pid: distinct among running workers
    try:
        limit_resources(device)
        enforced.append("limits")
    except (OSError, ValueError) as exc:
        missing["limits"] = str(exc)
    try:
        _call(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET), "unshare")
    except OSError as exc:
        missing.update({name: str(exc) for name in WANTED})
        return {"enforced": enforced, "missing": missing, "uid": uid}
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
    return {"enforced": enforced, "missing": missing, "uid": uid}
