"""Test set-up: no GPU here, so kernels run on the CPU through Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported anywhere in this process; evaluation workers get it
from the sandbox. On a GPU machine, `KERNELEVO_TEST_DEVICE=cuda` runs the evaluator tests' candidates (the attacks
included) on the GPU instead; tests that assert interpreter-only behaviour then fail by design.
"""
import os

DEVICE = os.environ.get("KERNELEVO_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from fitness.evaluator import EvalSettings, Evaluator  # noqa: E402
from fitness.policy import load_policy  # noqa: E402
from fitness.problem import resolve_problem  # noqa: E402
from hardware_profiles import load_profile, resolve_profile  # noqa: E402

TESTS = Path(__file__).resolve().parent
CANDIDATES = TESTS / "candidates"
PROBLEMS = TESTS / "problems"
SCALE_SHIFT = str(PROBLEMS / "scale_shift.py")


def candidate(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def make_evaluator(problem=SCALE_SHIFT, policy="triton", size_preset="full", sizes=None, **settings) -> Evaluator:
    settings.setdefault("trials", 3)
    profile = load_profile("cpu_interpreter") if DEVICE == "cpu" else resolve_profile("auto")
    return Evaluator(resolve_problem(problem, sizes=sizes or {}, size_preset=size_preset), load_policy(policy),
                     profile, EvalSettings(**settings), device=DEVICE)


def read_store(run_dir, read):
    """What `read(store)` returns from a run's store, through its typed API (no SQL outside evo/store.py)."""
    from evo.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        return read(store)
    finally:
        store.close()


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent pid, ...; start time at 19), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def processes_under(root: int) -> dict[int, tuple[int, str]]:
    """The processes below `root` now (its descendants, whatever their session): pid -> (parent pid, start time),
    from the parent links in /proc; nothing outside `root`'s tree is kept."""
    table = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = process_stat(int(entry))
        if fields is not None:
            table[int(entry)] = (int(fields[1]), fields[19])
    found, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (ppid, start)
                todo.append(pid)
    return found


def alive(pid: int, start: str) -> bool:
    """Whether that process (not a later one with its pid) still runs; a zombie has ended."""
    fields = process_stat(pid)
    return fields is not None and fields[19] == start and fields[0] != "Z"


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def replay_measurements(run_dir, into) -> dict:
    """A run's measurements (evaluation key -> result), stored into a new run directory `into`, so a second run there
    sees the same ones (timings on the interpreter are wall-clock noise)."""
    from evo.store import RunStore

    measured = read_store(run_dir, lambda store: store.evaluations())
    store = RunStore(into)
    try:
        for key, result in measured.items():
            store.add_evaluation(key, result)
    finally:
        store.close()
    return measured


@pytest.fixture(scope="module")
def evaluator():
    with make_evaluator() as ev:
        yield ev
