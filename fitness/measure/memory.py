"""How many input sets a timing can hold in the device's memory.

KernelBench's problems are large (level1/36_RMSNorm_: 7.5 GB per tensor). The baselines' timing rotates several
input sets (three sets of a 7.5 GB problem need 22.5 GB before any output); the number of sets is cut to what fits,
never below one, and the result says so. A candidate's timing holds one set at a time (a fresh draw per call,
``fitness.judge.timed_inputs``), and on a checked call its copy and the reference's output, as a correctness trial does.
"""
from __future__ import annotations

import torch

from fitness.settings import TimingSettings

GiB = 1 << 30


def tensor_bytes(values) -> int:
    """Bytes of the tensors in `values` (nested lists and tuples)."""
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    return 0


def spec_bytes(specs: list) -> int:
    """Bytes of outputs given as (shape, dtype) pairs."""
    total = 0
    for shape, dtype in specs:
        count = 1
        for n in shape:
            count *= n
        total += count * torch.empty((), dtype=dtype).element_size()
    return total


def budget_bytes(device: str, settings: TimingSettings) -> int | None:
    """Device memory the timing may use: `memory_budget_bytes` when set, else a fraction (`memory_fraction`) of
    what is free now, counting what this process's allocator holds unused; None on the CPU (no limit)."""
    if settings.memory_budget_bytes:
        return int(settings.memory_budget_bytes)
    if not device.startswith("cuda"):
        return None
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int((free + cached) * settings.memory_fraction)


def input_sets_that_fit(configured: int, per_set: int, reserve: int, budget: int | None) -> tuple[int, str]:
    """(how many input sets, a note when fewer than `configured`): each set takes `per_set` bytes, and `reserve`
    bytes stay free for the rest of the timing (the reference's output, the L2 flush buffer)."""
    if budget is None or per_set <= 0:
        return configured, ""
    count = max(1, min(configured, (budget - reserve) // per_set))
    if count >= configured:
        return configured, ""
    return count, (f"timing rotated {count} input set(s) instead of {configured}: one set takes "
                   f"{per_set / GiB:.1f} GiB with its copies and output, and {budget / GiB:.1f} GiB of device memory "
                   f"was available ({reserve / GiB:.1f} GiB kept for the reference output and the L2 flush)")
