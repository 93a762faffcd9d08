"""Evaluation worker: a fresh process that runs exactly one job and writes its result as JSON.

Started by ``fitness.sandbox`` with a scrubbed environment in a private directory. It imports torch and triton,
binds its timers and installs the launch counter *before* reading its job, so candidate code (imported only
after that) cannot change them. Jobs:

* ``candidate``: correctness gate (several seeded trials, inputs verified unchanged, the reference computed after
  the candidate on a saved copy of the inputs, output memory poisoned), honesty guards, then timing.
* ``baseline``: time the eager reference and torch.compile with the same timer and inputs.

Usage: ``python -m fitness.worker`` with one JSON job on stdin.
"""
from __future__ import annotations

import time

_STARTED = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from contextlib import nullcontext  # noqa: E402
from pathlib import Path  # noqa: E402

from fitness import timing  # noqa: F401  (binds the clocks first)
from fitness.guards import LaunchCounter, TorchOpTrace

import torch  # noqa: E402

from fitness.candidate import (CandidateError, build_model, classify_exception, copy_parameters,  # noqa: E402
                               describe_exception, load_candidate, module_name_for)
from fitness.correctness import as_tensor_list, changed_inputs, compare_outputs  # noqa: E402
from fitness.gpu_lock import DeviceLock  # noqa: E402
from fitness.policy import PrecisionPolicy  # noqa: E402
from fitness.problem import ProblemSpec, call_get_init_inputs, call_get_inputs, load_problem  # noqa: E402

LAUNCHES = LaunchCounter()
LAUNCHES.install()


def prewarm_triton() -> None:
    """While idle as a spare: load Triton's compiler and build its driver helpers by compiling (not launching) a
    tiny kernel, so a candidate's own compile starts warm. Best effort: any failure just skips the warm-up."""
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _prewarm(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        _prewarm.warmup(torch.float32, 1, BLOCK=128, grid=(1,))
    except Exception as exc:  # pragma: no cover - depends on the Triton version
        print(f"[worker] Triton pre-warm skipped: {type(exc).__name__}: {exc}", file=sys.stderr)


prewarm_triton()
PHASES: dict = {"import": time.perf_counter() - _STARTED}


class phase:
    """Adds the seconds spent in a `with phase("name"):` block to PHASES (reported with the result)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        PHASES[self.name] = PHASES.get(self.name, 0.0) + time.perf_counter() - self.start


class Verdict(Exception):
    """Ends a candidate job early with a status and reason (rejected, incorrect, ...)."""

    def __init__(self, status: str, reason: str, **fields):
        super().__init__(reason)
        self.status, self.reason, self.fields = status, reason, fields


# inputs ----------------------------------------------------------------------------------------------------------
def make_inputs(problem, seed: int, device: str) -> list:
    """get_inputs() under a seed, created directly on the device."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = call_get_inputs(problem)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def refill(buffers: list, fresh: list) -> None:
    """Write fresh values into the same input buffers, so a result cached by input pointer goes stale."""
    for i, (old, new) in enumerate(zip(buffers, fresh)):
        if isinstance(old, torch.Tensor):
            old.copy_(new)
        else:
            buffers[i] = new


def clone_all(values: list) -> list:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def scrub(tensors) -> None:
    """Overwrite tensors before they are freed, so no later allocation finds their contents."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            t.detach().fill_(float("nan") if t.is_floating_point() else -1)


def poison_allocator(output_specs: list, device: str) -> None:
    """Allocate output-sized blocks filled with NaN and free them: uninitialised outputs then read as NaN."""
    blocks = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in output_specs for _ in range(2)]
    scrub(blocks)
    del blocks


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# candidate job ---------------------------------------------------------------------------------------------------
def reference_output_specs(reference, problem, job) -> list:
    """Shapes and dtypes of the reference outputs, from a probe input that is scrubbed afterwards."""
    probe = make_inputs(problem, job["seed"] + 10_000, job["device"])
    outputs = as_tensor_list(reference(*probe))
    specs = [(tuple(o.shape), o.dtype) for o in outputs]
    scrub(outputs)
    return specs


def check_guards(trace, module_name: str, policy: PrecisionPolicy, settings: dict) -> dict:
    guards = {"triton_launches": LAUNCHES.count(module_name),
              "other_triton_launches": sum(LAUNCHES.launches.values()) - LAUNCHES.count(module_name),
              "torch_ops": dict(trace.ops) if trace else {}, "torch_compute_ops": [], "labels": []}
    if settings.get("require_triton_launch", True) and guards["triton_launches"] == 0:
        raise Verdict("rejected", "forward launched no Triton kernel of its own: the candidate must compute its "
                      "output with @triton.jit kernels defined in its module", guards=guards)
    if trace is not None:
        compute = trace.compute_ops(policy.extra_allowed_ops)
        guards["torch_compute_ops"] = compute
        if compute and policy.torch_compute == "reject":
            raise Verdict("rejected", f"forward does real work with torch ops {compute}; under policy "
                          f"'{policy.name}' only allocation, views and copies may run in torch: move this "
                          f"computation into a Triton kernel", guards=guards)
        if compute:
            guards["labels"].append("uses-torch-compute")
    return guards


def run_trials(reference, model_new, problem, job, policy, module_name) -> dict:
    device, settings = job["device"], job["settings"]
    specs = reference_output_specs(reference, problem, job)
    buffers, worst, guards = None, None, {}
    for trial in range(settings["trials"]):
        fresh = make_inputs(problem, job["seed"] + trial, device)
        if buffers is None:
            buffers = fresh
        else:
            refill(buffers, fresh)
        saved = clone_all(buffers)
        poison_allocator(specs, device)
        synchronize(device)  # the poison has landed before the candidate runs, on whatever stream it uses
        LAUNCHES.reset()
        trace = TorchOpTrace(LAUNCHES) if trial == 0 and settings.get("trace_torch_ops", True) else None
        with phase("first_call" if trial == 0 else "trial_calls"), trace or nullcontext():
            output = model_new(*buffers)
            synchronize(device)
        if trial == 0:
            guards = check_guards(trace, module_name, policy, settings)
        changed = changed_inputs(buffers, saved)
        if changed:
            raise Verdict("rejected", f"forward modified its input(s) {changed} (trial {trial}); inputs must be "
                          f"left unchanged", guards=guards, trials_passed=trial)
        refs = as_tensor_list(reference(*saved))
        comparison = compare_outputs(output, refs, policy)
        scrub(as_tensor_list(output) + refs)
        if not comparison.ok:
            raise Verdict("incorrect", f"trial {trial} (input seed {job['seed'] + trial}): {comparison.reason}",
                          guards=guards, trials_passed=trial, max_abs_err=comparison.max_abs_err,
                          max_rel_err=comparison.max_rel_err, rel_l2=comparison.rel_l2)
        worst = comparison if worst is None else worst.worst(comparison)
    return {"guards": guards, "trials_passed": settings["trials"], "max_abs_err": worst.max_abs_err,
            "max_rel_err": worst.max_rel_err, "rel_l2": worst.rel_l2}


def timing_inputs(problem, job) -> list:
    count = job["settings"]["timing"].get("input_sets", 3)
    return [make_inputs(problem, job["seed"] + 1000 + j, job["device"]) for j in range(count)]


def time_candidate(model_new, problem, job) -> dict:
    timer = timing.make_timer(job["device"], job["l2_bytes"], job["settings"]["timing"])
    stats = timer.measure(model_new, timing_inputs(problem, job))
    if job["device"].startswith("cuda") and timing.unseen_stream_work(stats):
        raise Verdict("rejected", f"the device was busy {stats.all_streams_median_s * 1e6:.0f} us per call but the "
                      f"timed stream only {stats.stream_median_s * 1e6:.0f} us: forward leaves work on another "
                      f"stream (all streams are timed; use the current stream)",
                      timing={"candidate": stats.to_dict()})
    return stats.to_dict()


def run_candidate_job(job: dict) -> dict:
    policy = PrecisionPolicy.from_dict(job["policy"])
    device, seed = job["device"], job["seed"]
    with phase("setup"):
        problem = load_problem(ProblemSpec.from_dict(job["problem"]))
        torch.set_float32_matmul_precision("highest")  # the reference that judges correctness is full fp32
        init_inputs = call_get_init_inputs(problem)
        reference = build_model(problem.Model, init_inputs, seed, device)
        module_name = module_name_for(job["source"])
        module = load_candidate(job["source"], Path.cwd())
        try:
            model_new = build_model(module.ModelNew, init_inputs, seed, device)
        except Exception as exc:
            raise CandidateError("runtime_error", "constructing ModelNew failed: "
                                 + describe_exception(exc, module.__file__)) from exc
        param_sync = copy_parameters(reference, model_new)
    with torch.no_grad():
        try:
            with phase("compile_call"):  # JIT-compiles the kernels outside the GPU lock; its output is discarded
                scrub(as_tensor_list(model_new(*make_inputs(problem, seed + 20_000, device))))
                synchronize(device)
            with DeviceLock(job.get("gpu_lock")):
                with phase("trials"):
                    result = run_trials(reference, model_new, problem, job, policy, module_name)
                with phase("timing"):
                    result["timing"] = {"candidate": time_candidate(model_new, problem, job)}
        except (Verdict, CandidateError):
            raise
        except Exception as exc:
            raise CandidateError(classify_exception(exc), describe_exception(exc, module.__file__)) from exc
    result["guards"]["param_sync"] = param_sync
    return {"status": "ok", **result}


# baseline job ----------------------------------------------------------------------------------------------------
def run_baseline_job(job: dict) -> dict:
    """Time the eager reference and torch.compile of it, with the candidate's timer and inputs."""
    policy = PrecisionPolicy.from_dict(job["policy"])
    problem = load_problem(ProblemSpec.from_dict(job["problem"]))
    torch.set_float32_matmul_precision(policy.fp32_matmul_precision)
    reference = build_model(problem.Model, call_get_init_inputs(problem), job["seed"], job["device"])
    inputs = timing_inputs(problem, job)
    with DeviceLock(job.get("gpu_lock")):  # the timer allocates and calibrates on the GPU
        timer = timing.make_timer(job["device"], job["l2_bytes"], job["settings"]["timing"])
    result = {"status": "ok", "timing": {}, "notes": [f"baselines at fp32 matmul precision "
                                                      f"'{policy.fp32_matmul_precision}'"]}
    with torch.no_grad():
        compiled = None
        if job["settings"].get("compile_baseline", True):
            try:
                compiled = torch.compile(reference)
                compiled(*inputs[0])  # compile outside the GPU lock
            except Exception as exc:  # a reference torch.compile cannot handle is a note, not a failure
                compiled = None
                result["notes"].append(f"torch.compile baseline failed: {type(exc).__name__}: {exc}"[:500])
        with DeviceLock(job.get("gpu_lock")):
            result["timing"]["eager"] = timer.measure(reference, inputs).to_dict()
            if compiled is not None:
                result["timing"]["compile"] = timer.measure(compiled, inputs).to_dict()
    return result


# entry point -----------------------------------------------------------------------------------------------------
def run_job(job: dict) -> dict:
    runner = {"candidate": run_candidate_job, "baseline": run_baseline_job}[job["kind"]]
    try:
        return runner(job)
    except Verdict as verdict:
        return {"status": verdict.status, "reason": verdict.reason, **verdict.fields}
    except CandidateError as exc:
        return {"status": exc.status, "reason": exc.reason}
    except Exception as exc:  # an error of the problem or of kernelevo itself, not of the candidate
        return {"status": "runtime_error", "reason": f"evaluation failed outside the candidate: "
                                                     f"{describe_exception(exc)}", "internal_error": True}


def write_result(path: str, result: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(result, fh, default=str)
    os.replace(tmp, path)


def main() -> None:
    job = json.loads(sys.stdin.readline())
    PHASES["idle"] = time.perf_counter() - _STARTED - PHASES["import"]  # waiting as a warm spare: no cost
    with phase("cuda_init"):
        if job["device"].startswith("cuda:"):
            torch.cuda.set_device(torch.device(job["device"]))
        if job["device"].startswith("cuda"):
            torch.cuda.init()
    result = run_job(job)
    result["phases_s"] = dict(PHASES)
    write_result(job["result_path"], result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: nothing the candidate registered at exit may run


if __name__ == "__main__":
    main()
