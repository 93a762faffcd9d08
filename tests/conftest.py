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
