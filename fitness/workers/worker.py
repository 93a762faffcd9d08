"""Evaluation worker: what a forked worker process does with exactly one job, writing its result as JSON.

Workers are forked by the fork server (``fitness.workers.zygote``), which imported torch, triton and this module --
binding the timers and installing the launch counter -- before any candidate code exists, and never touched CUDA.
``serve`` is the child's life: initialise CUDA on its device (a spare is then warm), wait for its job file, run the
job, write the result and leave with ``os._exit``. Jobs:

* ``candidate``: the judging pipeline (``fitness.judge.pipeline.judge``: setup, compile pass, correctness trials
  and guards, timing), on inputs drawn from a secret seed drawn here.
* ``baseline``: the compiled baselines (torch.compile at its defaults and max-autotune) and their first calls
  (shared lock), then every baseline the job names timed with the candidate's timer and inputs (exclusive lock).
* ``profile``: a judged candidate once more under Nsight Compute (``fitness.workers.ncu``), the GPU held exclusively.
* ``prewarm`` (trusted): compile a tiny kernel, so Triton's driver stubs exist in the trusted cache
  (``fitness.workers.warm``, which also holds what a spare warms before its job).

``phases_s`` of a result, in seconds: fork, wait_start (for its turn to start up and the GPU's shared lock),
cuda_init, prewarm, warm_judge, idle (these in a spare before its job arrives), import (0: done once in the fork
server), wait_memory (for a GPU memory slot, when slots admit memory: the compile pass then runs before it, on a
model built on the meta device), setup, compile, wait_shared, trials (of which trial_specs, trial_inputs,
first_call, trial_calls, trial_judge, trial_compare with its trial_reference), coverage (the coverage trial,
``fitness.coverage``: of which coverage_call, the candidate's calls), wait_exclusive, timing (of which
timed_inputs: the fresh draws of the timed calls' inputs, and verify_timed: the checks of the sampled calls).
``spans`` of a result: [phase, start, end] in wall-clock seconds (``time.time``) of the stages in SPAN_PHASES, so
a benchmark can lay the evaluations of a run on one timeline (who held the GPU when; ``experiments/bench_search.py``).
Diagnostics only: nothing scores from them.
"""
from __future__ import annotations

import gc
import json
import os
import secrets
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

from fitness.measure import timing  # binds the clocks first
from fitness.judge.checks import Verdict  # noqa: E402
from fitness.judge.guards import LaunchCounter

import torch  # noqa: E402

from fitness.common.atomic import write_atomic  # noqa: E402
from fitness.measure.baselines import (COMPILED, PRECISION_NOTE, compiled_library, graph_breaks,  # noqa: E402
                                       inductor_code, stage_of as baseline_stage)
from fitness.judge.candidate import CandidateError, build_model, crowded_out, describe_exception  # noqa: E402
from fitness.workers.confine import become_unprivileged  # noqa: E402
from fitness.common.gpu_lock import DeviceLock, inductor_benchmarks_shared, start_up  # noqa: E402
from fitness.judge.inputs import reference_output_specs, timing_inputs  # noqa: E402
from fitness.measure.memory import spec_bytes  # noqa: E402
from fitness.comparison.policy import PrecisionPolicy  # noqa: E402
from fitness.problems.problem import ProblemSpec, call_get_init_inputs, load_problem  # noqa: E402
from fitness.measure.result import WorkerJob  # noqa: E402
from fitness.workers.warm import prewarm_triton, warm_judge  # noqa: E402
from fitness.judge.phases import PHASES, SPANS, gpu_lock, memory_held, phase  # noqa: E402
from fitness.judge.pipeline import judge  # noqa: E402
from fitness.common.stage import stage  # noqa: E402
from fitness.judge import interpreter_bf16  # noqa: E402

JOB_FILE = "job.json"  # written (atomically renamed) into the worker's directory by the sandbox
JOB_POLL_S = 0.005
LAUNCHES = LaunchCounter()
LAUNCHES.install()
interpreter_bf16.install()  # bf16 dots and casts on the CPU interpreter as on a GPU (a no-op on a GPU)
MEMORY: list = []  # the job's memory slot, held until the process ends (its descriptors close then)
KEEP_ALIVE: list = []  # the candidate's objects and failures, never freed: no finalizer of theirs runs after judging


# candidate job ---------------------------------------------------------------------------------------------------
def run_candidate_job(job: WorkerJob) -> dict:
    """The candidate job (``fitness.judge.pipeline.judge``), its verdict carrying the secret seed its inputs were drawn
    from (reported afterwards, so a failing trial can be reproduced). The seed is drawn before the candidate is
    imported and lives only in locals: the inputs cannot be regenerated in advance. Parameters are initialised from
    the configured seed."""
    input_seed = secrets.randbits(31)
    gc.disable()  # no collection at an arbitrary moment runs a finalizer of the candidate's inside the judge
    result = judge(job, input_seed, LAUNCHES, MEMORY, KEEP_ALIVE)
    return {**result, "input_seed": input_seed}


# baseline job ----------------------------------------------------------------------------------------------------
def run_baseline_job(job: WorkerJob) -> dict:
    """Time the baselines the job names (``fitness.baselines``: the eager reference, torch.compile of it at its
    defaults and in max-autotune-no-cudagraphs mode) with the candidate's timer and inputs. A compiled baseline that
    fails to compile is left out and named in the result's `failed`; each compiles in a stage of its own
    (``fitness.measure.baselines.stage_of``), so the sandbox stops a compilation past
    fitness.baseline_compile_timeout_s."""
    policy = PrecisionPolicy.from_dict(job.policy)
    names = job.baselines  # the evaluator's baseline_names: fitness.baselines, the compiled ones on a GPU
    stage("setting up the reference (baselines)")
    problem = load_problem(ProblemSpec.from_dict(job.problem))
    torch.set_float32_matmul_precision(policy.fp32_matmul_precision)
    result = {"status": "ok", "timing": {}, "failed": {}, "library": {}, "compile_s": {},
              "notes": [f"{PRECISION_NOTE} '{policy.fp32_matmul_precision}'"]}
    with gpu_lock(job, exclusive=False), phase("setup"):
        reference = build_model(problem.Model, call_get_init_inputs(problem), job.settings.seed, job.device)
        with torch.no_grad():
            output_bytes = spec_bytes(reference_output_specs(reference, problem, job, job.settings.seed))
        inputs, note = timing_inputs(problem, job, job.settings.seed, copies=1, output_bytes=output_bytes,
                                     kept_outputs=False)
        result["notes"] += [note] if note else []
    models = {"eager": reference} if "eager" in names else {}
    with torch.no_grad():
        for name in (n for n in names if n in COMPILED):
            # the GPU held while Inductor benchmarks (max-autotune), not while it compiles: a compile of minutes
            # kept a neighbour's timer, and every user of the GPU behind its claim, waiting (gpu_lock)
            with phase("compile"), inductor_benchmarks_shared(job.gpu_lock):
                stage(baseline_stage(name))
                started = time.perf_counter()
                try:
                    compiled = torch.compile(reference, **COMPILED[name])
                    # what it calls: cuBLAS, cuDNN or Triton, and eager code at graph breaks (fitness.baselines)
                    with inductor_code() as codes, graph_breaks() as breaks:
                        compiled(*inputs[0])  # compiles (max-autotune: benchmarks its choices), then runs once
                    models[name] = compiled
                    if codes or breaks:
                        result["library"][name] = compiled_library(codes, breaks)
                except Exception as exc:  # a reference torch.compile cannot handle: the other baselines stand
                    result["failed"][name] = f"{type(exc).__name__}: {exc}"[:500]
                result["compile_s"][name] = round(time.perf_counter() - started, 2)  # its first call's too
        stage(f"timing the baselines {', '.join(models)}")
        with gpu_lock(job, exclusive=True), phase("timing"):  # the timer allocates and calibrates on the GPU
            timer = timing.make_timer(job.device, job.l2_bytes, job.settings.timing)
            result["timing"], notes = timing.settled_baselines(timer, models, inputs)
            result["notes"] += notes
    return result


# profile job -----------------------------------------------------------------------------------------------------
def run_profile_job(job: WorkerJob) -> dict:
    """A judged candidate run once more under Nsight Compute (``fitness.workers.ncu``), the GPU held alone: ncu replays
    its kernels and locks the clocks, which would disturb anything timed beside it."""
    from fitness.workers.ncu import profile_in_worker

    with gpu_lock(job, exclusive=True), phase("profile"):
        return {"status": "ok", "profile": profile_in_worker(job)}


# entry point -----------------------------------------------------------------------------------------------------
def run_job(job: WorkerJob) -> dict:
    """The job's result; a runtime error that is another process's doing (``crowded_out``: the GPU's memory held by
    others) is no verdict: the evaluation service runs it again in a fresh worker, and never stores it."""
    result = _run_job(job)
    crowded = crowded_out(result.get("reason") or "") if result.get("status") == "runtime_error" else ""
    return {**result, "infrastructure": True, "reason": f"{crowded}: {result['reason']}"} if crowded else result


def _run_job(job: WorkerJob) -> dict:
    runners = {"candidate": run_candidate_job, "baseline": run_baseline_job, "profile": run_profile_job,
               "prewarm": lambda j: {"status": "ok", "prewarm": prewarm_triton(j.device)}}
    try:
        with memory_held(job) if job.kind in ("baseline", "profile") else nullcontext():
            return runners[job.kind](job)
    except Verdict as verdict:
        return {"status": verdict.status, "reason": verdict.reason, **verdict.fields}
    except CandidateError as exc:
        return {"status": exc.status, "reason": exc.reason}
    except Exception as exc:  # an error of the problem or of kernelevo itself, not of the candidate
        return {"status": "runtime_error", "reason": f"evaluation failed outside the candidate: "
                                                     f"{describe_exception(exc)}", "internal_error": True}


def write_result(path: str, result: dict) -> None:
    write_atomic(path, json.dumps(result, default=str))


def init_cuda(device: str) -> str:
    """Create the CUDA context on the job's device (the caller holds the GPU's shared lock); "" or why it failed
    (reported with the job)."""
    try:
        if device.startswith("cuda:"):
            torch.cuda.set_device(torch.device(device))
        if device.startswith("cuda"):
            torch.cuda.init()
            torch.zeros(1, device=device)  # the context itself is made lazily, by the first use
            torch.cuda.synchronize()
        return ""
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"


def wait_for_job(path: Path) -> WorkerJob:
    while True:
        try:
            return WorkerJob.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            time.sleep(JOB_POLL_S)


def serve(device: str, forked_at: float, origin: dict | None = None, warm: dict | None = None) -> None:
    """A forked worker's life (in its private directory and environment): CUDA, warm-up, wait for the job, run it,
    exit. `origin` (the fork server's pid, the confinement it got) is reported with the result; `warm` says what the
    spare warms before its job and how it starts up (``fitness.workers.warm``): {"judge": bool, "gpu_lock": path,
    "start_up_under_lock": bool}."""
    PHASES.clear()
    SPANS.clear()
    PHASES.update({"fork": max(time.monotonic() - forked_at, 0.0), "import": 0.0})
    # one start-up at a time, each (its CUDA context, then the judge's warm-up) holding the GPU's shared lock unless
    # fitness.start_up_under_lock is false (whether a start-up disturbs a timing is the hardware profile's to say:
    # docs/measurements.md)
    warm = warm or {}
    under_lock = warm.get("start_up_under_lock", True)
    asked = time.monotonic()
    with start_up(warm.get("gpu_lock"), hold_gpu=under_lock):
        PHASES["wait_start"] = time.monotonic() - asked
        with phase("cuda_init"):
            cuda_error = init_cuda(device)
    if not cuda_error:
        with phase("prewarm"):
            prewarm_triton(device)  # compiles on the host; loads one small module
        if warm.get("judge"):
            with phase("warm_judge"), DeviceLock(warm.get("gpu_lock") if under_lock else None, exclusive=False):
                warm_judge(device)
    ready = time.monotonic()
    job = wait_for_job(Path(JOB_FILE))
    Path(JOB_FILE).unlink(missing_ok=True)  # the token in it proves the result is ours: gone before candidate code
    job, token = replace(job, token=""), job.token
    PHASES["idle"] = time.monotonic() - ready
    if job.kind in ("candidate", "profile"):
        become_unprivileged(job, (origin or {}).get("confinement"))  # before the candidate's code exists
    if cuda_error:
        result = {"status": "runtime_error", "internal_error": True, "infrastructure": True,  # before the job
                  "reason": f"evaluation failed outside the candidate: CUDA initialisation failed: {cuda_error}"}
    else:
        result = run_job(job)
    result["phases_s"] = dict(PHASES)
    result["spans"] = [list(span) for span in SPANS]
    result["worker"] = {"pid": os.getpid(), "parent_pid": os.getppid(), **(origin or {})}
    result["token"] = token
    write_result(job.result_path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: nothing the candidate registered at exit may run
