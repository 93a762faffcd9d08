"""Where a bench's prestarted search waits before it touches its GPU (issue 45: no time per problem outside the search).
The gate's protocol lives with the run, which waits at it; the bench above opens it (the run imports nothing of the
bench that drives it).

The bench (``evo.benchmark.bench.LocalBackend``, ``bench.backend.prestart``) starts the next problem's process on a GPU
while the current one searches there. The new process starts its interpreter, imports, composes and checks its config,
then waits here until the bench opens its gate (a file the bench makes when the GPU is free), so a GPU still runs
one search at a time and what a fresh process costs before its first GPU work is off the GPU's critical path. The
run says how long it waited (``start_up_s``'s ``queued``); the bench's row counts its wall time from the gate.
May import nothing of kernelevo's."""
from __future__ import annotations

import os
import time
from pathlib import Path

START_GATE = "KERNELEVO_START_GATE"  # environment: the file whose existence lets this process's run begin
POLL_S = 0.05


def wait_for_gate() -> float:
    """Wait until this process's gate is open (no gate: at once); the seconds waited. Ctrl-C (the bench's interrupt)
    ends the wait with KeyboardInterrupt, before the run has made anything."""
    path = os.environ.get(START_GATE)
    if not path:
        return 0.0
    start = time.time()
    while not os.path.exists(path):
        time.sleep(POLL_S)
    return time.time() - start


def open_gate(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
