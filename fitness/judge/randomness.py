"""Random numbers a problem's forward draws as part of its specification, reproduced exactly (inside the evaluation
worker).

KernelBench level3/35_LSTM draws its initial state on every call (``h0 = torch.randn(...)`` when forward is not
given one): the draw is an input the problem makes for itself, not a computation of the output. A kernel can match
such a reference only by drawing the very same numbers, so the judge makes the draws reproducible, and keeps
everything else as hard to fool as before:

* **Which draws**: an ATen op torch tags ``nondeterministic_seeded`` that reads no tensor's values (``randn``,
  ``rand``, ``randint``, ``normal`` of scalars, ``randperm``; the ``*_like`` forms read only a shape): ``is_draw``.
  ``bernoulli(p)`` or ``normal(mean_tensor, ...)`` compute from their inputs: they stay torch compute.
* **Found from the reference**: its first call (the output shapes' probe) is watched (``watching``); the names of
  the draws it makes are the only draws a candidate may make (``fitness.judge.checks.check_guards``), under every
  policy, and each verdict records them (``guards["random_draws"]``, label ``draws-random-numbers``). A candidate
  of a problem whose reference draws nothing may draw nothing either (it is torch compute, rejected under policy
  ``triton``).
* **Seeded alike** (``ForwardSeeds``): before every call of the candidate's forward the judge seeds torch's
  generators (``torch.manual_seed``: the CPU's and every GPU's) from a fresh secret, and before every call of the
  reference (and of its float64 and TF32 copies) from the seed of the candidate's last call: the reference computed
  on that call's inputs draws what the candidate drew when it made the same torch calls in the same order. A
  candidate that draws other numbers (another generator, another seed, fewer or reordered draws, a constant, or
  the draws of an earlier call kept) fails the comparison; nothing is learned from the seed (it is not the inputs').
  Only where the reference draws does the judge install the seeding: other problems' calls are untouched.
"""
from __future__ import annotations

import secrets
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode

LABEL = "draws-random-numbers"


def is_draw(func, args: tuple = (), kwargs: dict | None = None) -> bool:
    """`func` (an ATen op overload) makes random numbers from torch's generator without reading any tensor's values
    (module docstring)."""
    if torch.Tag.nondeterministic_seeded not in getattr(func, "tags", ()):
        return False
    tensors = [a for a in (*args, *(kwargs or {}).values()) if isinstance(a, torch.Tensor)]
    if not tensors:
        return True
    return func.overloadpacket.__name__.endswith("_like") and len(tensors) == 1 and args and tensors[0] is args[0]


class _Draws(TorchDispatchMode):
    """The draws (``is_draw``) dispatched while active, by op name."""

    def __init__(self):
        super().__init__()
        self.found: set = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if is_draw(func, args, kwargs):
            self.found.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@contextmanager
def watching(reference: torch.nn.Module):
    """While inside, the reference's forward calls (and only they: not the inputs' get_inputs()) are watched; yields
    the set of the draws' names they made, filled as they run."""
    mode, found = _Draws(), set()

    def enter(module, args):
        mode.__enter__()

    def leave(module, args, output):
        mode.__exit__(None, None, None)
        found.update(mode.found)

    handles = [reference.register_forward_pre_hook(enter), reference.register_forward_hook(leave, always_call=True)]
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


class ForwardSeeds:
    """Seeds torch's generators alike before the candidate's forward and the reference's (module docstring). The
    hooks are closures (a deep copy of the reference, its float64 or TF32 copy, keeps them and this object)."""

    def __init__(self):
        self.seed = secrets.randbits(63)
        self.calls = 0

    def install(self, reference: torch.nn.Module, candidate: torch.nn.Module) -> None:
        def candidate_call(module, args):
            self.seed, self.calls = secrets.randbits(63), self.calls + 1
            torch.manual_seed(self.seed)

        def reference_call(module, args):
            torch.manual_seed(self.seed)

        reference.register_forward_pre_hook(reference_call)
        candidate.register_forward_pre_hook(candidate_call)


def seed_alike(reference: torch.nn.Module, candidate: torch.nn.Module, draws: set) -> ForwardSeeds | None:
    """ForwardSeeds installed on both models where the reference draws random numbers (`draws`, from
    ``watching``); None (nothing installed) where it does not."""
    if not draws:
        return None
    seeds = ForwardSeeds()
    seeds.install(reference, candidate)
    return seeds


def note(draws) -> str:
    """The verdict's note on a problem whose forward draws random numbers."""
    return (f"the reference's forward draws random numbers ({', '.join(sorted(draws))}): the judge seeded torch's "
            f"generator alike before each call of the candidate and of the reference, and allowed the candidate "
            f"exactly those draws")
