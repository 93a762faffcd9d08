"""Hopper's TMA for candidates: a kernel that builds tensor descriptors on the device (``tl.make_tensor_descriptor``)
needs global scratch memory from Triton's allocator, which a candidate may not set (``triton.set_allocator`` is
refused by the static check: process-wide state the judge owns). The judge sets one before the candidate is imported:
each request a fresh torch allocation on the candidate's device, so what it costs is the candidate's, inside its
timed calls. Host descriptors (``triton.tools.tensor_descriptor.TensorDescriptor``) need nothing."""
from __future__ import annotations

import torch


def sanction_allocator(device: str) -> bool:
    """Triton's allocator set to torch allocations on `device`; False where the installed Triton has none."""
    import triton

    setter = getattr(triton, "set_allocator", None)
    if setter is None:
        return False

    def allocate(size: int, alignment: int, stream):  # noqa: ARG001 - torch's allocations are 256-byte aligned
        return torch.empty(size, dtype=torch.int8, device=device)

    setter(allocate)
    return True
