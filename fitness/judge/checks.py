"""Per-call checks of a candidate's ``forward`` (inside the evaluation worker), on every correctness trial and every
timed call, so a candidate cannot be honest on the calls that are watched and cheat on the others.

* ``check_output_types``: outputs are exact ``torch.Tensor`` objects (or an exact tuple / list of them); a tensor
  subclass could compute its values with torch when the checker touches it, after ``forward`` returned.
* ``check_guards``: the launch count and the torch-op trace of one correctness call, accumulated over the trials.
* ``TimedCalls``: wraps ``forward`` for the timer; every timed call must launch a kernel of the candidate's own.
* ``check_timed_output``: one timed call's output against the reference, on a copy of its inputs (the sampled
  calls of ``fitness.judge.timed_inputs``).
"""
from __future__ import annotations

import torch

from fitness.comparison.correctness import as_tensor_list, changed_inputs, compare_outputs
from fitness.judge.inputs import scrub
from fitness.judge.randomness import LABEL as DRAWS_LABEL
from kernelevo.core.evaluation_record import Status
from fitness.settings import EvalSettings


class Verdict(Exception):
    """Ends a candidate job early with a status and reason (rejected, incorrect, ...)."""

    def __init__(self, status: str, reason: str, **fields):
        super().__init__(reason)
        self.status, self.reason, self.fields = Status.of(status, "a verdict"), reason, fields


def output_type_problem(output) -> str:
    """Why forward's return value is not a plain tensor (or an exact tuple / list of them); "" when it is."""
    if type(output) in (tuple, list):
        for i, item in enumerate(output):
            if type(item) is not torch.Tensor:
                return f"output #{i} is a {type(item).__module__}.{type(item).__qualname__}"
        return ""
    if type(output) is not torch.Tensor:
        return f"the output is a {type(output).__module__}.{type(output).__qualname__}"
    return ""


def check_output_types(output, where: str, **fields) -> None:
    problem = output_type_problem(output)
    if problem:
        raise Verdict("rejected", f"{problem} ({where}): forward must return plain torch.Tensor objects (exactly "
                      f"torch.Tensor, not a subclass or another type), or a tuple / list of them", **fields)


def empty_guards() -> dict:
    return {"triton_launches": 0, "other_triton_launches": 0, "torch_ops": {}, "torch_compute_ops": [],
            "labels": []}


def check_guards(guards: dict, trace, launches, module_name: str, policy, settings: EvalSettings, where: str,
                 draws=(), **fields) -> dict:
    """Adds one correctness call's launches and torch ops to `guards`; Verdict when the call broke a guard. `draws`:
    the random draws the reference makes (``fitness.judge.randomness``), the only ones the candidate may make."""
    own = launches.count(module_name)
    guards["triton_launches"] += own
    guards["other_triton_launches"] += sum(launches.launches.values()) - own
    if settings.require_triton_launch and own == 0:
        raise Verdict("rejected", f"forward launched no Triton kernel of its own ({where}): the candidate must "
                      f"compute its output with @triton.jit kernels defined in its module, on every call",
                      guards=guards, **fields)
    if trace is None:
        return guards
    for op, n in trace.ops.items():
        guards["torch_ops"][op] = guards["torch_ops"].get(op, 0) + n
    compute = trace.compute_ops(policy.extra_allowed_ops, draws)
    guards["torch_compute_ops"] = sorted(set(guards["torch_compute_ops"]) | set(compute))
    drawn = sorted(set(trace.draws) - set(compute))
    if drawn:
        guards["random_draws"] = sorted(set(guards.get("random_draws", [])) | set(drawn))
        if DRAWS_LABEL not in guards["labels"]:
            guards["labels"].append(DRAWS_LABEL)
    if compute and policy.torch_compute == "reject":
        unasked = sorted(set(compute) & set(trace.draws))
        own = (f"only the reference's own draws {sorted(draws)} may be made, with the same torch calls" if draws
               else "the reference draws no random numbers")
        why = f" (random draws the reference does not make: {unasked}; {own})" if unasked else ""
        raise Verdict("rejected", f"forward does real work with torch ops {compute} ({where}){why}; under policy "
                      f"'{policy.name}' only allocation, views and copies may run in torch: move this "
                      f"computation into a Triton kernel", guards=guards, **fields)
    if compute and "uses-torch-compute" not in guards["labels"]:
        guards["labels"].append("uses-torch-compute")
    return guards


class TimedCalls:
    """The callable the timer times: forward, plus a launch count per call; the last output is kept (no finalizer of
    the candidate's runs when it is freed after judging). The bookkeeping is a few dictionary operations on the
    host, hidden like the rest of the launch overhead."""

    def __init__(self, model, launches, module_name: str, require_launch: bool = True):
        self.model, self.launches, self.module_name = model, launches, module_name
        self.require_launch = require_launch
        self.calls, self.without_launch, self.first_without_launch = 0, 0, None
        self.last = None

    def __call__(self, *args):
        before = self.launches.count(self.module_name)
        self.last = None
        output = self.model(*args)
        if self.launches.count(self.module_name) == before:
            self.without_launch += 1
            if self.first_without_launch is None:
                self.first_without_launch = self.calls
        self.calls += 1
        self.last = output
        return output

    def check_launches(self) -> None:
        if self.require_launch and self.without_launch:
            raise Verdict("rejected", f"{self.without_launch} of {self.calls} timed calls launched no Triton kernel of "
                          f"the candidate's own (first: timed call {self.first_without_launch}): every call of "
                          f"forward must compute its output with the candidate's kernels")


def check_timed_output(output, inputs: list, saved: list, reference, policy, where: str, allowance=None) -> None:
    """One timed call, just returned: its output types, its inputs unchanged (against `saved`, the copy taken before
    the call) and its output against the reference, computed now on `saved` (and scrubbed after: no later
    allocation of the candidate's finds it); a failed comparison gets the second opinion of `allowance`
    (``fitness.judge.rounding``), when given. Verdict on any failure."""
    check_output_types(output, where)
    changed = changed_inputs(inputs, saved)
    if changed:
        raise Verdict("rejected", f"forward modified its input(s) {changed} while timed ({where}); inputs must be "
                      f"left unchanged")
    refs = as_tensor_list(reference(*saved))
    comparison = compare_outputs(output, refs, policy)
    if allowance is not None:
        comparison = allowance.judge(comparison, output, refs, saved, where)
    scrub(refs)
    if not comparison.ok:
        raise Verdict("incorrect", f"the output of a timed call differs from the reference ({where}): "
                      f"{comparison.reason}", max_abs_err=comparison.max_abs_err,
                      max_rel_err=comparison.max_rel_err, rel_l2=comparison.rel_l2)
