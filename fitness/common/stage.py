"""What a worker's job is doing now, in its directory's STAGE_FILE: a timeout's reason says what was running, and
the sandbox times the stages spent compiling (those beginning with COMPILE_STAGE: fitness.compile_timeout_s,
``fitness.workers.job_clock.CompileClock``). The stage names every side reads are here: the worker writes them, the fork
server (``fitness.workers.zygote``) and the sandbox's clocks (``fitness.workers.job_clock``) read them."""
from __future__ import annotations

from fitness.common.atomic import write_atomic

STAGE_FILE = "stage.txt"  # in a worker's directory: what its job is doing now
COMPILE_STAGE = "compiling the candidate's kernels"  # how every stage spent compiling begins (fitness.workers.sandbox)
BASELINE_COMPILE_STAGE = "compiling the baseline"  # how a baseline job's compile stages begin (fitness.baselines)
MEMORY_STAGE = "waiting for a GPU memory slot"  # the sandbox stops a job's clock while others hold every slot
GPU_WAIT_STAGE = "waiting for the GPU's lock"  # and while others hold the GPU's lock it waits for (capped)

STAGE = [""]  # what stage() said last


def stage(text: str) -> None:
    """Say what the job is doing now (in its directory, STAGE_FILE), so a timeout can say what was running, and the
    sandbox can time a compile (a stage beginning with COMPILE_STAGE: fitness.compile_timeout_s)."""
    STAGE[0] = text
    try:
        write_atomic(STAGE_FILE, text)
    except OSError:  # a diagnosis only: never the reason an evaluation fails
        pass


class CompileStage:
    """``LaunchCounter.on_compile`` of a candidate job: while Triton builds a kernel, ahead or on its first real
    call, the stage names it (so the sandbox's compile time limit runs, kernel by kernel), then says again what it
    said before."""

    def __init__(self):
        self.before: str | None = None
        self.builds = 0

    def __call__(self, kernel: str | None) -> None:
        if kernel is None:
            if self.before is not None:
                stage(self.before)
            self.before = None
            return
        if self.before is None:
            self.before = STAGE[0]
        self.builds += 1  # every build a stage of its own, even of a kernel built before with other constants
        where = "" if self.before.startswith(COMPILE_STAGE) else f", on its first call ({self.before})"
        stage(f"{COMPILE_STAGE}: build {self.builds}, {kernel}{where}")
