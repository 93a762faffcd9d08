"""The probe trial: the candidate on inputs beyond the drawn distribution (inside the worker's correctness gate).

An output can ignore an input only for the distribution ``get_inputs()`` draws from: KernelBench level2/9 computes
``relu((x W^T + b - 2) * 1.5)``, which is 0 for every ``torch.rand`` draw of x, so a kernel writing zeros passed
every trial (issue 63). ``fitness.problems.dependence`` probes each input the draws show unused scaled, sign-flipped
and shifted, and records the probe under which the output moves (`beyond`); this trial draws inputs of its own
(the job's secret seed + ``PROBE_SEED``), transforms each such input by its probe, runs the candidate once on them,
checked like a trial, and compares its output with the reference's elementwise under the policy, the absolute
tolerance scaled to the output's magnitude (a probe can make it large: the fp32 rounding grows with it). A failed
comparison gets the second opinion against a float64 reference (``fitness.judge.rounding``), as every trial's does.
Problems with no such input run no probe trial: it costs nothing there.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from fitness.comparison.correctness import as_tensor_list, compare_outputs
from fitness.judge.inputs import scrub
from fitness.problems.dependence import apply_probe

PROBE_SEED = 40_000  # the probe trial's inputs: input_seed + this


def scaled_policy(policy, refs: list):
    """`policy` with every absolute tolerance multiplied by the reference outputs' rms magnitude, where above 1."""
    rms = max([float(r.detach().to(torch.float64).pow(2).mean().sqrt()) for r in refs
               if r.is_floating_point() and r.numel()] or [1.0])
    scale = rms if rms > 1.0 and rms == rms and rms != float("inf") else 1.0
    return replace(policy, tolerances={k: replace(t, atol=t.atol * scale) for k, t in policy.tolerances.items()})


def probe_trial(reference, judged_call, prepare, buffers: list, probes: list, names: list, policy,
                allowance=None) -> dict:
    """Run the probe trial on `buffers` (an input draw the candidate has not seen; transformed here), `probes`
    [[input index, probe name], ...]. `judged_call` and `prepare` as for the coverage trial
    (``fitness.judge.coverage.coverage_trial``). Returns {"inputs": {name: probe}}, with "failure" and the errors
    when the candidate's output did not match: the caller gives the verdict."""
    def name(i: int) -> str:
        return names[i] if i < len(names) else f"input {i}"

    with torch.no_grad():
        for index, probe in probes:
            buffers[index] = apply_probe(probe, buffers[index])
    summary = {"inputs": {name(i): probe for i, probe in probes}}
    where = "probe trial (" + ", ".join(f"{name(i)} {probe}" for i, probe in probes) + ")"
    fresh = prepare(buffers)
    output = judged_call(fresh, buffers, where, name="probe_call")
    with torch.no_grad():
        refs = as_tensor_list(reference(*buffers))
    comparison = compare_outputs(output, refs, scaled_policy(policy, refs), normwise=False)
    if allowance is not None:
        comparison = allowance.judge(comparison, output, refs, buffers, where)
    scrub(as_tensor_list(output) + refs + [t for t in fresh if isinstance(t, torch.Tensor)])
    if not comparison.ok:
        summary["failure"] = (
            f"{where}: {comparison.reason}. The output depends on these inputs beyond the values get_inputs() "
            f"draws (the reference's output moves there); a kernel must compute the problem's result for every "
            f"input, not only for the distribution the trials draw from")
        summary.update(max_abs_err=comparison.max_abs_err, max_rel_err=comparison.max_rel_err,
                       rel_l2=comparison.rel_l2)
    return summary
