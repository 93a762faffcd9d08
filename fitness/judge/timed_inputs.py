"""The inputs of a candidate's timed calls: a fresh draw for every call, and a seeded sample of the calls checked.

Timed calls that rotated among a few fixed input sets let a candidate remember its outputs keyed by the content of
its inputs (a hash, or a few strided elements): after the warm-up every timed call was a cache hit, its output
right, and on a memory-bound problem a copy of the cached output moves the bytes of the speed-of-light bound, so the
plausibility check does not see it (``tests/candidates/content_cache.py``). ``FreshInputs`` feeds the timer
(``fitness.measure.timing``) a new draw of the problem's ``get_inputs()`` before every call, warm-up included, under a seed
of its own (the job's secret input seed + ``SEED_OFFSET`` + the call's number, so no draw repeats another's, a
correctness trial's included), so such a cache never hits and the call costs what computing costs. The previous
call's inputs are freed before a draw (the allocator hands their memory to the next), so one set is held at a time.

Why draws and not a perturbation of fixed sets in place: no perturbation keeps every problem's inputs valid. Integer
inputs are class indices (``CrossEntropyLoss``), masks are bools, targets are +-1 floats (``HingeLoss``), inputs are
probability rows (``KLDivLoss``), triangular or symmetric matrices (KernelBench level 1, 13-15), heavy-tailed and
positive (``Pareto`` samples): a sign flip, a scaling or a roll breaks one or another, and a kernel specialised to the
stated structure would then be wrongly judged. A perturbation of a few elements is cheap but leaves a reduction to a
scalar (every loss) within tolerance of its cached value. A draw keeps the problem's distribution by construction;
it costs about what a global perturbation would (every input byte written once), outside the timed region.

After the warm-up, ``checked`` measured calls drawn at random (``random.Random`` seeded from the secret seed) are
checked right after they return: output types, inputs left unchanged, and the output against the reference on a copy
of the same inputs taken before the call, with the correctness gate's tolerances (``fitness.judge.checks``). A candidate
that answers from a stale or guessed result on a fraction f of its timed calls is caught with probability
1 - (1 - f) ** checked. It cannot tell a checked call from another before it returns: the copy goes into a buffer
allocated once, at the first draw, so the allocator's state (what ``torch.empty`` returns, its statistics) is the
same on every call.
"""
from __future__ import annotations

import random
import time

from fitness.judge.checks import check_timed_output
from fitness.judge.inputs import clone_all, make_inputs, refill, synchronize

SEED_OFFSET = 100_000  # above every other input seed offset of a job (trials, timing sets, probe, compile pass)
_perf_counter = time.perf_counter


class FreshInputs:
    """A timing feed (``fitness.measure.timing``): a fresh draw of the inputs before every call, a sample of the measured
    calls checked against `reference` under `policy` (a failed check gets the second opinion of `allowance`,
    ``fitness.judge.rounding``, when given). `draw_s` and `check_s` say what that cost."""

    def __init__(self, problem, device: str, input_seed: int, reference, policy, checked: int, allowance=None):
        self.problem, self.device, self.seed = problem, device, input_seed + SEED_OFFSET
        self.reference, self.policy, self.checked, self.allowance = reference, policy, checked, allowance
        self.rng = random.Random(input_seed)
        self.inputs: list | None = None
        self.saved: list | None = None  # a copy of a checked call's inputs, taken before the call (allocated once)
        self.calls, self.measured = 0, None  # every call; the measured calls once begin() was told
        self.sample: set = set()
        self.checked_calls: list[int] = []
        self.draw_s = self.check_s = 0.0

    def __len__(self) -> int:
        return 1

    def begin(self, calls: int) -> None:
        self.measured = 0
        self.sample = set(self.rng.sample(range(calls), min(self.checked, calls)))

    def next(self) -> list:
        start = _perf_counter()
        self.inputs = None  # freed first: the draw reuses their memory
        self.inputs = make_inputs(self.problem, self.seed + self.calls, self.device)
        self.calls += 1
        if self.saved is None:
            self.saved = clone_all(self.inputs)
        elif self._checking():
            refill(self.saved, self.inputs)
        synchronize(self.device)  # the draw's GPU time counted in draw_s (the timer synchronises next anyway)
        self.draw_s += _perf_counter() - start
        return self.inputs

    def done(self, output) -> None:
        if self._checking():
            start = _perf_counter()
            check_timed_output(output, self.inputs, self.saved, self.reference, self.policy,
                               f"measured timed call {self.measured}", self.allowance)
            self.checked_calls.append(self.measured)
            self.check_s += _perf_counter() - start
        if self.measured is not None:
            self.measured += 1

    def _checking(self) -> bool:
        return self.measured is not None and self.measured in self.sample

    def summary(self) -> dict:
        """The guards' account of the timed calls."""
        return {"timed_calls": self.calls, "timed_outputs_checked": sorted(self.checked_calls)}
