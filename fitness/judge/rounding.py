"""A second opinion on a failed comparison: the fp32 reference's own rounding (inside the evaluation worker).

An output element that is the sum of many large terms which cancel carries the fp32 reference's own rounding error:
in KernelBench level2/14 at full size (sums of 8192 x 8192 products, partial sums ~5e3) about 0.03, so at an output
element near zero any honest reassociation of the same algebra differs from the reference by more than atol. Only
when a comparison fails, the reference is computed once more in float64 -- a float64 copy of the reference model
(made once per job, on the same device) on the saved inputs with their floating-point tensors in float64, integer
inputs unchanged -- giving `exact`. The reference's own rounding error is e = ref - exact. The candidate's output
passes when, for every element, |out - exact| <= atol + rtol * |exact| + K * rms(e) (rms over that output tensor),
and, as a whole, ||out - exact|| <= max_rel_l2 * ||exact|| + K * ||e||: an output whose exact value is about zero
(level2/23, the mean of a group norm's output) is all rounding, and no honest kernel meets a bound relative to it.
A wrong kernel's error is far above K times the reference's rounding, so it still fails, with the ordinary message.
K is ``fitness.rounding_allowance`` (null: no second opinion). When the float64 reference cannot be computed (an op
without float64 support, out of memory) the original failure stands, and its reason says why.
"""
from __future__ import annotations

import copy
import math

import torch

from fitness.comparison.correctness import Comparison, as_tensor_list, compare_tensor
from fitness.judge.inputs import scrub
from fitness.comparison.policy import Tolerance


def _float64(values: list) -> list:
    """Floating-point tensors as float64 copies (never the tensor itself: it is scrubbed after), the rest as they are."""
    return [x.to(torch.float64, copy=True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in values]


def reference_error(ref: torch.Tensor, exact: torch.Tensor) -> tuple[float, float]:
    """(root mean square, 2-norm) of ref - exact over the elements where both are finite (0 when there are none)."""
    e = ref.detach().to(torch.float64) - exact
    e = e[torch.isfinite(e)]
    norm = float(torch.linalg.vector_norm(e)) if e.numel() else 0.0
    return (norm / math.sqrt(e.numel()) if e.numel() else 0.0), norm


def compare_with_allowance(out: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor, tol: Tolerance, k: float,
                           label: str = "output") -> tuple[Comparison, float]:
    """(`out` against `exact` within atol + rtol |exact| + k rms(ref - exact) per element and, as a whole,
    ||out - exact|| <= max_rel_l2 ||exact|| + k ||ref - exact||; the rms). The normwise bound gets the same allowance:
    an output whose exact value is about zero (level2/23: the mean of a group norm's output) is all rounding, so
    ||exact|| bounds nothing and any other honest order of the same sums misses a bound relative to it."""
    rms, norm = reference_error(ref, exact)
    allowed = Tolerance(tol.atol + k * rms, tol.rtol, tol.max_rel_l2, k * norm)
    return compare_tensor(out.detach().to(device=exact.device, dtype=torch.float64), exact, allowed, label,
                          fused=False), rms


class RoundingAllowance:
    """The second opinion of one job (``judge``), for every failed comparison of its trials, coverage trial and
    checked timed calls; what passed by it (``summary``, ``note``)."""

    def __init__(self, reference, policy, k: float | None):
        self.reference, self.policy, self.k = reference, policy, k
        self.model = None  # the float64 copy of the reference, made on first use
        self.unavailable = ""  # why the float64 reference cannot be computed, once it failed
        self.passed: list[str] = []
        self.rms = 0.0

    def _exact(self, saved: list) -> list:
        if self.model is None:
            self.model = copy.deepcopy(self.reference).double()
        inputs = _float64(saved)
        try:
            with torch.no_grad():
                return _float64([o.detach() for o in as_tensor_list(self.model(*inputs))])
        finally:
            scrub(inputs)

    def judge(self, comparison: Comparison, output, refs: list, saved: list, where: str) -> Comparison:
        """`comparison` (of `output` against `refs`, the reference's outputs on `saved`) when it passed, or failed
        for another reason than errors (shape, dtype, count, non-finite values); else the second opinion: passed
        (recorded) or the original failure, its reason saying what the second opinion found."""
        if (self.k is None or comparison.ok or comparison.max_abs_err is None
                or not math.isfinite(comparison.max_abs_err)):
            return comparison
        if not self.unavailable:
            try:
                exact = self._exact(saved)
            except Exception as exc:  # an op without float64 support, out of memory
                self.model = None
                self.unavailable = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        if self.unavailable:
            return Comparison(False, f"{comparison.reason} (no second opinion against a float64 reference: "
                                     f"{self.unavailable})", comparison.max_abs_err, comparison.max_rel_err,
                              comparison.rel_l2)
        try:
            outs, worst = as_tensor_list(output), 0.0
            for i, (out, ref, ex) in enumerate(zip(outs, refs, exact)):
                label = "output" if len(refs) == 1 else f"output #{i}"
                tol = self.policy.tolerance_for(ref.dtype)
                if compare_tensor(out, ref, tol, label).ok:
                    continue
                second, rms = compare_with_allowance(out, ref, ex, tol, self.k, label)
                worst = max(worst, rms)
                if not second.ok:
                    return Comparison(False, f"{comparison.reason} (beyond the fp32 reference's own rounding too: "
                                             f"{self.k:g} x its rms error {rms:.3g} against a float64 reference)",
                                      comparison.max_abs_err, comparison.max_rel_err, comparison.rel_l2)
        finally:
            scrub(exact)
        self.passed.append(where)
        self.rms = max(self.rms, worst)
        return Comparison(True, "", comparison.max_abs_err, comparison.max_rel_err, comparison.rel_l2)

    def summary(self) -> dict:
        """``guards["rounding_allowance"]``: where a comparison passed by the second opinion, the largest rms error
        of the reference met there and the allowance it gave (K times it)."""
        return {"trials": list(self.passed), "k": self.k, "reference_rms_error": self.rms,
                "allowance": self.k * self.rms}

    def note(self) -> str:
        return (f"passed within the fp32 reference's own rounding ({self.k:g} x its rms error, "
                f"{self.rms:.3g}, against a float64 reference) at {', '.join(self.passed)}")
