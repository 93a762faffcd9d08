"""Which step of the worker's confinement stops CUDA from starting (run on a GPU machine, repository root):

    python3 experiments/diagnostics/diagnose_confine_cuda.py steps      # each confinement step alone, then all of them
    python3 experiments/diagnostics/diagnose_confine_cuda.py writable   # everything read-only but one mount

Each variant runs in a forked child that applies the steps and then calls torch.cuda.init(); prints OK or the
error. Results: experiments/results/hardening_h100/hardening_h100.md (run 2026-11-23 as two scratch scripts with this
code, against fc802d7's `read_only_except`, which still made /proc read-only; with today's, the "ro" variants start
CUDA).
"""
import os
import sys
sys.path.insert(0, os.getcwd())
import torch
from fitness.workers import confine as C
libc = C._libc()

def step(name):
    if name == "net":
        C._call(libc.unshare(C.CLONE_NEWNET), "unshare net")
    elif name == "ns":
        C._call(libc.unshare(C.CLONE_NEWNS), "unshare ns")
        C._call(libc.mount(None, b"/", None, C.MS_REC | C.MS_PRIVATE, None), "rprivate")
    elif name == "pid":
        C._call(libc.unshare(C.CLONE_NEWPID), "unshare pid")
        pid = os.fork()
        if pid:
            C._mirror_exit(pid)
    elif name == "proc":
        C._call(libc.mount(b"proc", b"/proc", b"proc", C.MS_NOSUID | C.MS_NODEV | C.MS_NOEXEC, None), "mount proc")
    elif name == "ro":
        os.makedirs("/tmp/diagw", exist_ok=True)
        C.read_only_except(libc, ["/tmp/diagw"])
    elif name == "limits":
        C.limit_resources("cuda")
    elif name == "full":
        os.makedirs("/tmp/diagw", exist_ok=True)
        print("confine:", C.confine(["/tmp/diagw"], "cuda"), flush=True)

def nvidia_proc():
    return os.listdir("/proc/driver/nvidia") if os.path.isdir("/proc/driver/nvidia") else "absent"


def run_steps():
    variants = [["limits"], ["net"], ["ns"], ["ns", "pid"], ["ns", "pid", "proc"], ["ns", "ro"],
                ["ns", "pid", "proc", "ro"], ["full"]]
    for v in variants:
        pid = os.fork()
        if pid == 0:
            try:
                for s in v:
                    step(s)
                torch.cuda.init()
                print(v, "OK", torch.cuda.device_count(), flush=True)
            except Exception as e:
                print(v, "FAIL", type(e).__name__, str(e)[:200], flush=True)
                if "proc" in v or "full" in v:
                    print("  /proc/driver/nvidia:", nvidia_proc(), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
    print("host /proc/driver/nvidia:", nvidia_proc())
    os.system("grep -E ' /proc| /dev' /proc/self/mountinfo | head -30; ls -la /dev | grep -i nvidia")


def run_writable():
    os.makedirs("/tmp/diagw", exist_ok=True)
    for keep in [["/dev"], ["/proc"], ["/sys"], ["/dev/shm"], ["/dev", "/proc", "/sys"], ["/dev/pts"]]:
        pid = os.fork()
        if pid == 0:
            try:
                C._call(libc.unshare(C.CLONE_NEWNS), "unshare ns")
                C._call(libc.mount(None, b"/", None, C.MS_REC | C.MS_PRIVATE, None), "rprivate")
                C.read_only_except(libc, ["/tmp/diagw"])
                for k in keep:
                    C._set_read_only(libc, k, False, recursive=True)
                torch.cuda.init()
                print(keep, "OK", flush=True)
            except Exception as e:
                print(keep, "FAIL", str(e)[:120], flush=True)
            os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    run_steps() if sys.argv[1:] == ["steps"] else run_writable()
