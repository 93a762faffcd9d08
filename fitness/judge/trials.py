"""The correctness gate of a candidate job (inside the evaluation worker, ``fitness.workers.worker``): the trials on
fresh inputs, then the coverage trial (``fitness.coverage``), every call of forward checked the same way."""
from __future__ import annotations

from contextlib import nullcontext

import torch

from fitness.judge.checks import Verdict, check_guards, check_output_types, empty_guards
from fitness.comparison.correctness import as_tensor_list, changed_inputs, compare_outputs
from fitness.judge.coverage import coverage_trial
from fitness.judge.differential import DIFFERENTIAL_SEED, differential_trial
from fitness.judge.parameters import PARAMETER_SEED
from fitness.judge.probes import PROBE_SEED, probe_trial
from fitness.judge.rounding import RoundingAllowance
from fitness.judge.tf32 import TF32Reference, no_reduced_reference
from fitness.judge.guards import TorchOpTrace
from fitness.judge.inputs import clone_all, make_inputs, poison_allocator, scrub, synchronize
from fitness.judge.phases import gpu_lock, phase
from fitness.common.stage import stage

COVERAGE_SEED = 30_000  # the coverage trial's inputs and element choice: input_seed + this (trials use + 0..trials-1)


def run_trials(reference, model_new, problem, job, policy, module_name, input_seed: int, verify, specs,
               launches, allowance=None, draws=(), parameters=None) -> dict:
    """The correctness trials, each under the shared GPU lock on its own: a timer waiting for the GPU waits for the
    trial a worker is in, not for all of them. Every call of the candidate gets new input tensors, as every timed call
    does: it cannot tell a checked call from a timed one by the inputs' identity (a kernel honest on the objects the
    trials refilled and subsampling on others passed, issue 63). Every trial is traced and its launches counted, and
    the judge's state verified (`verify`) before its output is looked at. `specs`: the reference outputs' shapes and
    dtypes; `launches`: the worker's launch counter.
    Then the coverage trial (``fitness.coverage``), timed as its own phase. A failed comparison gets the second
    opinion of `allowance` (``fitness.judge.rounding.RoundingAllowance``), when given. `draws`: the random draws the
    reference makes (``fitness.judge.randomness``), the only ones the candidate may make.
    Then the probe trial (``fitness.judge.probes``; only where the job names probes), the parameter trial
    (`parameters`, a ``fitness.judge.parameters.ParameterTrial``; None: not run) and the differential trial
    (``fitness.judge.differential``), each its own phase."""
    device, settings = job.device, job.settings
    worst, guards = None, empty_guards()
    passed = [0]

    def failed(found: dict, seed: int) -> None:
        """The verdict of a trial after the ordinary ones (coverage, probe, parameter, differential) whose record has a
        failure."""
        if "failure" in found:
            raise Verdict("incorrect", f"{found['failure']} (input seed {seed})", guards=guards,
                          trials_passed=settings.trials, max_abs_err=found["max_abs_err"],
                          max_rel_err=found["max_rel_err"], rel_l2=found["rel_l2"])

    def judged_call(inputs: list, saved: list, where: str, first: bool = False, name: str = "trial_calls"):
        """forward on `inputs`, traced and its launches counted (the phase `name`, or first_call), the judge's state
        and guards checked and its inputs verified unchanged (against `saved`): its output."""
        launches.reset()
        trace = TorchOpTrace(launches) if settings.trace_torch_ops else None
        with phase("first_call" if first else name), trace or nullcontext():
            output = model_new(*inputs)
            synchronize(device)
        with phase("trial_judge"):
            verify(where, guards=guards, trials_passed=passed[0])
            check_output_types(output, where, guards=guards, trials_passed=passed[0])
            check_guards(guards, trace, launches, module_name, policy, settings, where, draws,
                         trials_passed=passed[0])
        changed = changed_inputs(inputs, saved)
        if changed:
            raise Verdict("rejected", f"forward modified its input(s) {changed} ({where}); inputs must be left "
                          f"unchanged", guards=guards, trials_passed=passed[0])
        return output

    def prepare(inputs: list) -> list:
        """A copy of `inputs` (new tensors), the output memory poisoned after it."""
        saved = clone_all(inputs)
        poison_allocator(specs, device)
        synchronize(device)  # the poison has landed before the candidate runs, on whatever stream it uses
        return saved

    for trial in range(settings.trials):
        stage(f"correctness trial {trial + 1}/{settings.trials}")
        with gpu_lock(job, exclusive=False), phase("trials"):
            with phase("trial_inputs"):
                inputs = saved = None  # new tensors for every call, the last call's freed first, as a timed call's
                inputs = make_inputs(problem, input_seed + trial, device)  # (fitness.judge.timed_inputs)
                saved = prepare(inputs)
            output = judged_call(inputs, saved, f"trial {trial + 1}", first=trial == 0)
            with phase("trial_compare"):
                with phase("trial_reference"):
                    refs = as_tensor_list(reference(*saved))
                comparison = compare_outputs(output, refs, policy)
                if allowance is not None:
                    comparison = allowance.judge(comparison, output, refs, saved, f"trial {trial + 1}")
                scrub(as_tensor_list(output) + refs)
        if not comparison.ok:
            raise Verdict("incorrect", f"trial {trial + 1} (input seed {input_seed + trial}): {comparison.reason}",
                          guards=guards, trials_passed=trial, max_abs_err=comparison.max_abs_err,
                          max_rel_err=comparison.max_rel_err, rel_l2=comparison.rel_l2)
        worst = comparison if worst is None else worst.worst(comparison)
        passed[0] = trial + 1
    if settings.coverage:
        stage("coverage trial")
        with gpu_lock(job, exclusive=False), phase("coverage"):
            inputs = saved = None
            buffers = make_inputs(problem, input_seed + COVERAGE_SEED, device)
            generator = torch.Generator().manual_seed(input_seed + COVERAGE_SEED)
            # a reference without matmuls computes the same at TF32: no second reference (nor its input copies)
            reduced = TF32Reference() if job.reference_matmuls else no_reduced_reference
            guards["coverage"] = coverage_trial(reference, judged_call, buffers, job.coverage_inputs,
                                                job.input_names, policy, generator, prepare,
                                                allowance, reduced)
        failed(guards["coverage"], input_seed + COVERAGE_SEED)
    if settings.probe_trial and job.probes:
        stage("probe trial")
        with gpu_lock(job, exclusive=False), phase("probes"):
            buffers = make_inputs(problem, input_seed + PROBE_SEED, device)
            guards["probes"] = probe_trial(reference, judged_call, prepare, buffers, job.probes, job.input_names,
                                           policy, allowance)
        failed(guards["probes"], input_seed + PROBE_SEED)
    if settings.parameter_trial and parameters is not None:
        stage("parameter trial")
        with gpu_lock(job, exclusive=False), phase("parameters"):
            guards["parameters"] = parameters.run(
                judged_call, prepare, lambda k: make_inputs(problem, input_seed + PARAMETER_SEED + k, device), policy,
                lambda model: None if allowance is None else RoundingAllowance(model, policy, allowance.k))
        failed(guards["parameters"], input_seed + PARAMETER_SEED)
    if settings.differential_trial:
        stage("differential trial")
        with gpu_lock(job, exclusive=False), phase("differential"):
            exact = (allowance or RoundingAllowance(reference, policy, None)).exact
            buffers = make_inputs(problem, input_seed + DIFFERENTIAL_SEED, device)
            generator = torch.Generator().manual_seed(input_seed + DIFFERENTIAL_SEED)
            guards["differential"] = differential_trial(
                reference, exact, judged_call, prepare, buffers, job.coverage_inputs, job.input_names, policy,
                generator, (allowance.k or 0.0) if allowance is not None else 0.0, allowance)
        failed(guards["differential"], input_seed + DIFFERENTIAL_SEED)
    if allowance is not None and allowance.passed:
        guards["rounding_allowance"] = allowance.summary()
    return {"guards": guards, "trials_passed": settings.trials, "max_abs_err": worst.max_abs_err,
            "max_rel_err": worst.max_rel_err, "rel_l2": worst.rel_l2}
