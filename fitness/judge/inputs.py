"""The judge's inputs: made under a seed on the device, copied (a copy refilled in place), scrubbed before they are
freed, and as many timing sets as fit in the device's memory (``fitness.measure.memory``)."""
from __future__ import annotations

import secrets

import torch

from fitness.measure import memory
from fitness.comparison.correctness import as_tensor_list
from fitness.problems.problem import ProblemError, call_get_inputs


def make_inputs(problem, seed: int, device: str) -> list:
    """get_inputs() under a seed, created directly on the device; the global RNG is then re-seeded from a fresh
    secret, so neither torch.initial_seed() nor the generator's state tells a candidate the inputs' seed."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = call_get_inputs(problem)
    torch.manual_seed(secrets.randbits(63))
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def meta_inputs(problem) -> list:
    """get_inputs() on the meta device, as ``make_inputs`` makes them on a GPU (dtypes, shapes, strides) but without
    memory or random numbers: the inputs of the compile pass (``fitness.judge.compile_ahead``), which reads no value."""
    with torch.device("meta"):
        inputs = call_get_inputs(problem)
    return [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]


def refill(buffers: list, fresh: list) -> None:
    """Write fresh values into the same buffers: the copy of a checked timed call's inputs, allocated once
    (``fitness.judge.timed_inputs``). A candidate's own inputs are new tensors on every call."""
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


def reference_output_specs(reference, problem, job, input_seed: int) -> list:
    """Shapes and dtypes of the reference outputs, from a probe input that is scrubbed afterwards."""
    probe = make_inputs(problem, input_seed + 10_000, job.device)
    try:
        outputs = as_tensor_list(reference(*probe))
    except Exception as exc:  # the problem's fault, never the candidate's (fitness.problems.problem.check_reference)
        raise ProblemError(f"{problem.spec.path}: the reference Model.forward failed: {type(exc).__name__}: "
                           f"{exc}; fix the problem file") from exc
    specs = [(tuple(o.shape), o.dtype) for o in outputs]
    scrub(outputs)
    return specs


def timing_inputs(problem, job, input_seed: int, copies: int, output_bytes: int, kept_outputs: bool) -> tuple:
    """(input sets, note): as many sets as configured (3) that fit in the device's memory (``fitness.measure.memory``),
    each counted `copies` times (with its saved copy) plus, when `kept_outputs`, the output kept for it; the note
    says how many sets were dropped and why."""
    settings = job.settings.timing
    budget = memory.budget_bytes(job.device, settings)
    first = make_inputs(problem, input_seed + 1000, job.device)
    per_set = copies * memory.tensor_bytes(first) + (output_bytes if kept_outputs else 0)
    count, note = memory.input_sets_that_fit(settings.input_sets, per_set, 2 * output_bytes + 2 * job.l2_bytes,
                                             budget)
    return [first] + [make_inputs(problem, input_seed + 1000 + j, job.device) for j in range(1, count)], note
