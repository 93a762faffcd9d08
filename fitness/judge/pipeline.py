"""The judging pipeline of a candidate job, run inside an evaluation worker (``fitness.workers.worker``, which draws the
secret input seed, keeps the process's state and writes the result): ``judge`` is its one call.

Setup (shared GPU lock), compiling the candidate's kernels ahead without launching anything (no lock,
``fitness.judge.compile_ahead``), the correctness gate (trials seeded from a secret per-job seed, inputs verified
unchanged, the reference computed after the candidate on a saved copy of the inputs, output memory poisoned) and
honesty guards on every trial (shared lock), then timing (exclusive lock), each timed call launching the candidate's
own kernels on a fresh draw of the inputs, a seeded sample of them checked against the reference as they return
(``fitness.judge.timed_inputs``). The judge's own state is verified between the steps (``fitness.judge.integrity``).

What belongs to the process is the worker's and passed in: the launch counter it installed before any candidate code
existed (``launches``), the list that holds the job's memory slot to the end (``memory``) and the one that keeps the
candidate's objects and failures alive (``keep_alive``: no finalizer of theirs runs after judging).
"""
from __future__ import annotations

from pathlib import Path

import torch

from fitness.measure import timing
from fitness.judge.checks import TimedCalls, Verdict
from fitness.judge.guards import LaunchCounter
from fitness.judge.candidate import (CandidateError, build_model, classify_exception, copy_parameters,
                                     describe_exception, load_candidate, module_name_for)
from fitness.judge.compile_ahead import compile_before_memory, compile_pass, copy_model, meta_pass
from fitness.judge.inputs import make_inputs, meta_inputs, reference_output_specs
from fitness.judge.timed_inputs import FreshInputs
from fitness.judge import randomness
from fitness.judge.integrity import JudgeState, judge_state_check
from fitness.comparison.policy import PrecisionPolicy
from fitness.problems.problem import ProblemError, ProblemSpec, call_get_init_inputs, load_problem
from fitness.measure.result import WorkerJob
from fitness.judge.rounding import RoundingAllowance
from fitness.judge.phases import PHASES, gpu_lock, memory_held, phase
from fitness.judge.trials import run_trials
from fitness.judge.tma import sanction_allocator
from fitness.judge.parameters import ParameterTrial
from fitness.common.stage import COMPILE_STAGE, CompileStage, stage


def judge(job: WorkerJob, input_seed: int, launches: LaunchCounter, memory: list, keep_alive: list) -> dict:
    """The candidate job's result: its verdict as a dict, from trials whose inputs are drawn from `input_seed`; never
    raises for anything the candidate does (a ``ProblemError``, the reference's failure, or the judge's own error
    propagates: the worker reports it as an internal error). A failure's traceback is kept in `keep_alive`: its frames
    hold the candidate's objects."""
    try:
        return judge_candidate(job, input_seed, launches, memory, keep_alive)
    except Verdict as verdict:
        keep_alive.append(verdict.__traceback__)  # its frames hold the candidate's objects
        return {"status": verdict.status, "reason": verdict.reason, **verdict.fields}
    except CandidateError as exc:
        keep_alive.append(exc.__traceback__)
        return {"status": exc.status, "reason": exc.reason}


def time_candidate(timed: TimedCalls, feed: FreshInputs, job) -> dict:
    """Time forward through `timed`, which counts each call's launches, on the inputs of `feed`, which draws them
    fresh for every call and checks a sample of the calls. Work left on another stream is rejected when a second
    timing shows it too: the device-wide end is recorded once the host's synchronize returns, so a host slow to wake
    under load looks the same once (docs/measurements.md), while a kernel that uses another stream does it every
    time."""
    timer = timing.make_timer(job.device, job.l2_bytes, job.settings.timing)
    try:
        stats = timer.measure(timed, feed)
        if job.device.startswith("cuda") and timing.unseen_stream_work(stats):
            stats = timer.measure(timed, feed)
    finally:
        PHASES["timed_inputs"] = PHASES.get("timed_inputs", 0.0) + feed.draw_s
        PHASES["verify_timed"] = PHASES.get("verify_timed", 0.0) + feed.check_s
    if job.device.startswith("cuda") and timing.unseen_stream_work(stats):
        raise Verdict("rejected", f"the device was busy {stats.all_streams_median_s * 1e6:.0f} us per call but the "
                      f"timed stream only {stats.stream_median_s * 1e6:.0f} us: forward leaves work on another "
                      f"stream (all streams are timed; use the current stream)",
                      timing={"candidate": stats.to_dict()})
    return stats.to_dict()


def compile_first(module, init_inputs, problem, job, verify, launches: LaunchCounter) -> str | None:
    """With memory admitted by slots (``job.memory_slots``), the compile pass before the slot is taken, on a model
    built on the meta device: its outcome, or None to compile once the model is on the device."""
    if not (job.memory_slots and job.device.startswith("cuda")):
        return None
    stage(COMPILE_STAGE)
    with phase("compile"):
        how = compile_before_memory(lambda: build_model(module.ModelNew, init_inputs, job.settings.seed, "meta"),
                                    lambda: meta_inputs(problem), launches)
    verify("compile pass")
    return how


def prepare_compile_pass(model_new, problem, job):
    """(what the compile pass starts from: ``fitness.judge.compile_ahead.meta_pass``, how it went so far), made under
    the shared lock; None on the CPU interpreter (nothing to compile)."""
    if not job.device.startswith("cuda"):
        return None, "skipped: CPU interpreter"
    return meta_pass(model_new, lambda: meta_inputs(problem)), ""


def device_compile_pass(model_new, problem, job, input_seed: int) -> tuple:
    """A device copy of the model and real inputs, for a compile pass that meta tensors could not run (the wait for
    the lock is no compile time)."""
    stage("copying the model and making inputs for the compile pass (it failed on meta tensors)")
    with gpu_lock(job, exclusive=False):
        made = copy_model(model_new), make_inputs(problem, input_seed + 20_000, job.device)
    stage(COMPILE_STAGE)
    return made


def judge_candidate(job: WorkerJob, input_seed: int, launches: LaunchCounter, memory: list, keep_alive: list) -> dict:
    """The pipeline itself (``judge``'s): the result of a candidate that passed, or a ``Verdict`` or ``CandidateError``
    raised."""
    policy = PrecisionPolicy.from_dict(job.policy)
    device, seed = job.device, job.settings.seed
    launches.on_compile = CompileStage()
    stage("importing the problem and the candidate")
    with phase("setup"):
        problem = load_problem(ProblemSpec.from_dict(job.problem))
        torch.set_float32_matmul_precision("highest")  # the reference that judges correctness is full fp32
        init_inputs = call_get_init_inputs(problem)
        module_name = module_name_for(job.source)
        sanction_allocator(device)  # device tensor descriptors (TMA): the judge's allocator, before the candidate
        state = JudgeState.capture()  # a local: out of the candidate's reach
        verify = judge_state_check(state)
        try:
            module = load_candidate(job.source, Path.cwd())
        finally:
            verify("import")  # a rejection here replaces an import error the candidate's code described
    compiled_how = compile_first(module, init_inputs, problem, job, verify, launches)
    memory.append(memory_held(job))  # held to the end: the models, inputs and outputs are made from here
    memory[-1].__enter__()
    stage("constructing the reference Model and ModelNew")
    with gpu_lock(job, exclusive=False), phase("setup"):  # models are built and initialised on the device
        reference = build_model(problem.Model, init_inputs, seed, device)
        state.watch(reference)  # built with the registries of global hooks verified unchanged: nothing of it changes
        try:
            model_new = build_model(module.ModelNew, init_inputs, seed, device)
        except Exception as exc:
            verify("constructing ModelNew")
            raise CandidateError("runtime_error", "constructing ModelNew failed: "
                                 + describe_exception(exc, module.__file__)) from exc
        param_sync = copy_parameters(reference, model_new)
        verify("constructing ModelNew")
        compile_from, compile_how = (None, compiled_how) if compiled_how else prepare_compile_pass(model_new, problem,
                                                                                                 job)
    result: dict = {}
    allowance = RoundingAllowance(reference, policy, job.settings.rounding_allowance)
    with torch.no_grad():
        try:
            if compile_from is not None:
                stage(COMPILE_STAGE)
                with phase("compile"):  # no lock: compiles, launches nothing
                    compile_how = compile_pass(
                        compile_from, lambda: device_compile_pass(model_new, problem, job, input_seed), launches)
                    del compile_from
                verify("compile pass")
            stage("running the reference once (output shapes)")
            with gpu_lock(job, exclusive=False), phase("trials"), phase("trial_specs"), \
                    randomness.watching(reference) as draws:
                specs = reference_output_specs(reference, problem, job, input_seed)
            randomness.seed_alike(reference, model_new, draws)  # a forward drawing random numbers: both alike
            parameters = ParameterTrial(problem, init_inputs, input_seed, device, reference, model_new, param_sync,
                                        draws)  # new weights from the secret seed
            result = run_trials(reference, model_new, problem, job, policy, module_name, input_seed, verify, specs,
                                launches, allowance, draws, parameters)
            timed = feed = None
            if job.timed:  # else correctness only: no timing, no exclusive lock
                timed = TimedCalls(model_new, launches, module_name, job.settings.require_triton_launch)
                feed = FreshInputs(problem, device, input_seed, reference, policy,
                                   checked=job.settings.timing.checked_calls,
                                   allowance=allowance)
                stage("timing the candidate")
                with gpu_lock(job, exclusive=True), phase("timing"):
                    result["timing"] = {"candidate": time_candidate(timed, feed, job)}
                verify("timing")
                timed.check_launches()
                result["guards"].update(feed.summary())
        except Verdict as verdict:  # a verdict on the timed calls keeps what the trials found
            for key in ("guards", "trials_passed", "timing"):
                if key in result:
                    verdict.fields.setdefault(key, result[key])
            verdict.fields.setdefault("guards", {})["compile_pass"] = compile_how
            raise
        except (CandidateError, ProblemError):  # a ProblemError: the reference failed (run_job: internal_error)
            raise
        except Exception as exc:
            verify("candidate error")  # before the judge's code describes it
            raise CandidateError(classify_exception(exc), describe_exception(exc, module.__file__)) from exc
    result["guards"].update(param_sync=param_sync, compile_pass=compile_how)
    if draws:
        result.setdefault("notes", []).append(randomness.note(draws))
    if allowance.passed:  # the trials' record, and the checked timed calls' since
        result["guards"]["rounding_allowance"] = allowance.summary()
        result.setdefault("notes", []).append(allowance.note())
    keep_alive.append((module, model_new, timed, feed))
    verify("end of judging")  # from here to the result file, no candidate code runs
    return {"status": "ok", **result}
