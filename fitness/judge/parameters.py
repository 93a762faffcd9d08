"""The parameter trial: a module must follow its parameters (inside the worker's correctness gate).

Trials and timed calls keep a model's parameters fixed, so a forward that computes something from them once and
keeps it (colsum(W) cached by the weight's ``data_ptr``, a transposed copy made on the first call) passed every
check while answering for weights it no longer has (issue 63). Between calls this trial changes the candidate's
parameters twice, as a user's training step or ``load_state_dict`` would: first in place (the same tensors, new
values: a cache keyed by pointer goes stale), then by replacement (new ``nn.Parameter`` objects: one keyed by
identity goes stale; set as a user would, through the module's own ``__setattr__``, which an RNN's keeps its flat
weight list by), each followed by one candidate call checked like a trial and compared with a reference
holding the same values. The new values are the parameters of the problem's ``Model`` built under other seeds (its
own initialisation: in distribution), noise added where that draws the same values (constants: a norm's weight of
ones). The judge's reference is never changed (``fitness.judge.integrity`` watches it): the changed reference is a
model of its own. Afterwards the candidate gets its own parameter objects back, holding their values again.
Only where ModelNew's state_dict lines up with Model's (the judge copied it, ``param_sync`` "state_dict"); else,
for a model without parameters and for a reference drawing random numbers (``fitness.judge.randomness``) the trial
is not run and the record says why.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from fitness.comparison.correctness import as_tensor_list, compare_outputs
from fitness.judge.candidate import build_model
from fitness.judge.inputs import scrub

PARAMETER_SEED = 50_000  # the trial's inputs: input_seed + this (+ 1 for the second call); its weights' seeds too
WAYS = ("in place", "by replacement")


def _changed_reference(problem, init_inputs: list, seed: int, device: str, reference) -> tuple:
    """(a copy of `reference` with new parameters, {name: new value}): the parameters of a Model built under `seed`,
    noise added where they equal the reference's (a constant initialisation); its buffers the reference's."""
    changed = build_model(problem.Model, init_inputs, seed, device)
    drawn = {n: p.detach().clone() for n, p in _parameters(changed).items()}
    changed.load_state_dict({n: t.detach().clone() for n, t in reference.state_dict().items()})
    generator = torch.Generator(device=device).manual_seed(seed)
    values = {}
    with torch.no_grad():
        for name, old in _parameters(reference).items():
            new = drawn.get(name, old.detach().clone())
            if old.is_floating_point() and old.numel() and torch.equal(new, old.detach()):
                noise = torch.randn(old.shape, generator=generator, device=device, dtype=old.dtype)
                new = old.detach() + noise * (float(old.detach().abs().mean()) or 1.0) * 0.5
            values[name] = new
            _parameters(changed)[name].copy_(new)
    return changed, values


def _owner(model, name: str) -> tuple:
    prefix, _, leaf = name.rpartition(".")
    return (nn.Module.get_submodule(model, prefix) if prefix else model), leaf


def _parameters(model) -> dict:
    """{name: parameter} of `model` by torch's own method (an override in the candidate is not asked)."""
    return dict(nn.Module.named_parameters(model))


class ParameterTrial:
    """Built in the worker once both models exist; ``run`` inside the correctness gate."""

    def __init__(self, problem, init_inputs: list, seed: int, device: str, reference, candidate, param_sync: str,
                 draws=()):
        self.problem, self.init_inputs, self.seed, self.device = problem, init_inputs, seed, device
        self.reference, self.candidate = reference, candidate
        self.names = names = [n for n, p in _parameters(reference).items() if p.is_floating_point() and p.numel()]
        own = _parameters(candidate)
        self.skip = ("Model has no floating-point parameters" if not names else
                     "ModelNew's state_dict does not line up with Model's" if param_sync != "state_dict" else
                     "the reference draws random numbers (its seeding is the trials')" if draws else
                     "ModelNew does not hold Model's parameters as parameters of the same names"
                     if any(n not in own for n in names) else "")

    def run(self, judged_call, prepare, make_inputs, policy, allowance_for) -> dict:
        """Two candidate calls (``WAYS``), each on a fresh draw `make_inputs(k)`, after its parameters changed;
        `judged_call` and `prepare` as for the coverage trial (``fitness.judge.coverage.coverage_trial``),
        `allowance_for(model)` the second opinion for a reference model (None: none). Returns {"changed": [ways]}
        or {"not_run": why}, with "failure" and the errors where the candidate's output did not follow."""
        if self.skip:
            return {"not_run": self.skip}
        originals = _parameters(self.candidate)
        kept = {n: originals[n].detach().clone() for n in self.names}
        summary = {"changed": []}
        try:
            for k, way in enumerate(WAYS):
                try:  # the judge's own model: out of memory is no verdict on the kernel
                    changed, values = _changed_reference(self.problem, self.init_inputs,
                                                         self.seed + PARAMETER_SEED + k, self.device, self.reference)
                except Exception as exc:  # noqa: BLE001
                    summary["not_run"] = f"no changed reference: {type(exc).__name__}: {str(exc).strip()[:160]}"
                    return summary
                with torch.no_grad():
                    for name in self.names:
                        if way == "in place":
                            originals[name].copy_(values[name])
                        else:
                            owner, leaf = _owner(self.candidate, name)
                            # the module's own __setattr__, as a user's: nn.LSTM's keeps its flat weights so
                            setattr(owner, leaf, nn.Parameter(values[name].clone(),
                                                              requires_grad=originals[name].requires_grad))
                failure = self._call(judged_call, prepare, make_inputs(k), policy, changed, allowance_for(changed),
                                     way)
                summary["changed"].append(way)
                if failure:
                    summary.update(failure)
                    return summary
        finally:
            with torch.no_grad():
                for name in self.names:
                    owner, leaf = _owner(self.candidate, name)
                    setattr(owner, leaf, originals[name])
                    originals[name].copy_(kept[name])
        return summary

    def _call(self, judged_call, prepare, buffers: list, policy, changed, allowance, way: str) -> dict:
        fresh = prepare(buffers)
        where = f"parameter trial, parameters changed {way}"
        output = judged_call(fresh, buffers, where, name="parameter_call")
        with torch.no_grad():
            refs = as_tensor_list(changed(*buffers))
        comparison = compare_outputs(output, refs, policy)
        if allowance is not None:
            comparison = allowance.judge(comparison, output, refs, buffers, where)
        scrub(as_tensor_list(output) + refs + [t for t in fresh if isinstance(t, torch.Tensor)])
        if comparison.ok:
            return {}
        return {"failure": f"{where} (as a training step or load_state_dict changes them): the candidate's output "
                           f"did not follow: {comparison.reason}. forward must compute from the module's current "
                           f"parameters on every call; a value cached from earlier parameters (by pointer, by "
                           f"identity) is stale",
                "max_abs_err": comparison.max_abs_err, "max_rel_err": comparison.max_rel_err,
                "rel_l2": comparison.rel_l2}
