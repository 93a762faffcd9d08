"""A second opinion on a failed comparison: the fp32 reference's own rounding (inside the evaluation worker).

An output element that is the sum of many large terms which cancel carries the fp32 reference's own rounding error:
in KernelBench level2/14 at full size (sums of 8192 x 8192 products, partial sums ~5e3) about 0.03, so at an output
element near zero any honest reassociation of the same algebra differs from the reference by more than atol. Only
when a comparison fails, the reference is computed once more in float64 -- a float64 copy of the reference model
(made once per job, on the same device) on the saved inputs with their floating-point tensors in float64, integer
inputs unchanged -- giving `exact`. The reference's own rounding error is e = ref - exact. The candidate's output
passes when, for every element, |out - exact| <= atol + rtol * |exact| + K * rms(e) (rms over the elements of about
the same magnitude and those below: ``compare_with_allowance``),
and, as a whole, ||out - exact|| <= max_rel_l2 * ||exact|| + K * ||e||: an output whose exact value is about zero
(level2/23, the mean of a group norm's output) is all rounding, and no honest kernel meets a bound relative to it.
Where an element is the small sum of huge terms that cancel (level3/49: exponentials of cumulative sums, values to
about 1e18, honest results near 10 off by several per cent), its rounding is not its magnitude class's: the
allowance per element is K times the larger of its class's rms and its spread, the largest change of the fp32
reference's own output when its inputs and weights are perturbed by 16 times their unit roundoff
(``perturbed_spread``): the rounding pattern then changes, so the spread measures each element's own rounding error.
A wrong kernel's error is far above K times the reference's rounding, so it still fails, with the ordinary message.
K is ``fitness.rounding_allowance`` (null: no second opinion). When the float64 reference cannot be computed (an op
without float64 support, out of memory) the original failure stands, and its reason says why.
"""
from __future__ import annotations

import copy
import itertools
import math

import torch

from fitness.comparison.correctness import CHUNK_ELEMENTS, Comparison, as_tensor_list, compare_tensor, unravel
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


CLASS_LOG2 = 4  # a magnitude class: the elements whose |exact| has the same floor(log2 / 4), a factor of 16
CLASSES = 81  # classes -40 .. 40 (2**-160 .. 2**160; zeros and beyond fall in the end classes)


def _class_of(exact: torch.Tensor) -> torch.Tensor:
    return (torch.log2(exact.abs()) / CLASS_LOG2).floor().nan_to_num(0.0).clamp(-(CLASSES // 2), CLASSES // 2) \
        .to(torch.int64) + CLASSES // 2


def class_rms(ref: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Per magnitude class of |exact| (``CLASS_LOG2``), the larger of the rms of the reference's rounding error e =
    ref - exact over the class and over every element no larger (its class and those below), over the elements where
    both are finite (0 where there are none), computed a chunk at a time. The second keeps a class of a few elements
    where the reference happened to round well from allowing nothing, without the errors of larger elements."""
    squares = torch.zeros(CLASSES, dtype=torch.float64, device=exact.device)
    counts = torch.zeros(CLASSES, dtype=torch.float64, device=exact.device)
    flat_ref, flat_exact = ref.detach().reshape(-1), exact.reshape(-1)
    for start in range(0, flat_exact.numel(), CHUNK_ELEMENTS):
        x = flat_exact[start:start + CHUNK_ELEMENTS]
        e = flat_ref[start:start + CHUNK_ELEMENTS].to(device=x.device, dtype=torch.float64) - x
        finite = torch.isfinite(e)
        classes = _class_of(x[finite])
        squares += torch.bincount(classes, weights=e[finite].square(), minlength=CLASSES)
        counts += torch.bincount(classes, minlength=CLASSES).to(torch.float64)
    own = (squares / counts.clamp(min=1)).sqrt()
    below = (squares.cumsum(0) / counts.cumsum(0).clamp(min=1)).sqrt()
    return torch.maximum(own, below)


PERTURBATION_ULPS = 16.0  # how far each value moves, in its unit roundoff (about a 16-term sum's backward error)
PERTURBATIONS = 4  # runs of the perturbed reference: an element's largest change over 4 is rarely far below its error
SPREAD_NOTE = ", or each element's own spread under rounding-sized perturbations"


def perturbed_spread(reference: torch.nn.Module, saved: list, runs: int = PERTURBATIONS,
                     ulps: float = PERTURBATION_ULPS) -> list[torch.Tensor]:
    """Per output of `reference` on the inputs `saved`, per element, the largest |ref' - ref| over `runs` runs with
    every floating-point input, parameter and buffer multiplied by 1 + `ulps` u r (r uniform in [-1, 1], u its
    dtype's unit roundoff), ref the unperturbed run: each element's own rounding error, as its rounding pattern and
    values move by about an honest kernel's backward error, which separates an honest reordering from a wrong
    kernel by far more than a perturbation of 1 u does (docs/measurements.md).
    Every run starts from the same random state (``fork_rng``), so a forward that draws random numbers (dropout)
    draws the same ones each time and spreads by its rounding only. The
    perturbed copies are scrubbed after (``scrub``); `reference` and `saved` are left as they were."""
    model = copy.deepcopy(reference)
    weights = [t for t in itertools.chain(model.parameters(), model.buffers()) if t.is_floating_point()]
    originals = [t.detach().clone() for t in weights]
    cuda = sorted({t.device.index or 0 for t in itertools.chain(weights, saved)
                   if isinstance(t, torch.Tensor) and t.device.type == "cuda"})
    base, spread = None, None
    try:
        for run in range(runs + 1):
            generators: dict = {}
            noise = (lambda t: 1 + ulps * torch.finfo(t.dtype).eps / 2 * (2 * torch.rand(
                t.shape, dtype=t.dtype, device=t.device,
                generator=generators.setdefault(t.device, torch.Generator(t.device).manual_seed(run))) - 1))
            inputs = [(x.detach() * noise(x) if run and x.is_floating_point() else x.detach().clone())
                      if isinstance(x, torch.Tensor) else x for x in saved]  # copies: an output may be an input
            with torch.no_grad(), torch.random.fork_rng(devices=cuda):
                for t, original in zip(weights, originals):
                    t.detach().copy_(original * noise(original) if run else original)
                outs = [o.detach() for o in as_tensor_list(model(*inputs))]
            scrub([x for x in inputs if isinstance(x, torch.Tensor)])
            if base is None:
                base, spread = outs, [torch.zeros(o.shape, dtype=torch.float32, device=o.device) for o in outs]
                continue
            for s, o, b in zip(spread, outs, base):
                torch.maximum(s, (o.to(torch.float64) - b.to(torch.float64)).abs().to(torch.float32), out=s)
            scrub(outs)
        return spread
    finally:
        scrub(originals + weights + (base or []))


def compare_with_allowance(out: torch.Tensor, ref: torch.Tensor, exact: torch.Tensor, tol: Tolerance, k: float,
                           label: str = "output", spread: torch.Tensor | None = None) -> tuple[Comparison, float]:
    """(`out` against `exact` within atol + rtol |exact| + k rms(e | its magnitude) per element, e = ref - exact, and,
    as a whole, ||out - exact|| <= max_rel_l2 ||exact|| + k ||e||; the rms of e over the output).

    Per element, the reference's rounding is measured among the elements of about the same magnitude and those below
    (``class_rms``), not over the whole output: rounding grows with the values. Where an output spans many orders of
    magnitude (level3/49's exponentials of cumulative sums, values to about 1e18) the rms over the whole of it was
    diluted by the many small elements for the huge ones (honest kernels failed on about a hundred of 16.8 million
    elements at 35 times that rms: 8.4e14 against 2.4e12) and, for the small ones, allowed the huge ones' error.
    The normwise bound gets the same allowance: an output whose exact value is about zero (level2/23: the mean of a
    group norm's output) is all rounding, so ||exact|| bounds nothing and any other honest order of the same sums
    misses a bound relative to it. `spread` (``perturbed_spread``), where given, is each element's own rounding: its
    allowance is k times the larger of the two, and the normwise one k times the larger norm."""
    rms, norm = reference_error(ref, exact)
    out64 = out.detach().to(device=exact.device, dtype=torch.float64)
    per_class = class_rms(ref, exact)
    flat_out, flat_exact, bad, first, worst = out64.reshape(-1), exact.reshape(-1), 0, None, 0.0
    flat_spread = spread.reshape(-1).to(exact.device) if spread is not None else None
    for start in range(0, flat_exact.numel(), CHUNK_ELEMENTS):
        x, o = flat_exact[start:start + CHUNK_ELEMENTS], flat_out[start:start + CHUNK_ELEMENTS]
        both = torch.isfinite(x) & torch.isfinite(o)  # the rest: compare_tensor's non-finite check below
        error, rounding = (o - x).abs(), per_class[_class_of(x)]
        if flat_spread is not None:
            rounding = torch.maximum(rounding, flat_spread[start:start + CHUNK_ELEMENTS].to(torch.float64))
        over = both & (error > tol.atol + tol.rtol * x.abs() + k * rounding)
        count = int(over.sum())
        if count:
            bad, worst = bad + count, max(worst, float(error[over].max()))
            first = first if first is not None else start + int(over.nonzero()[0, 0])
    if bad:
        where = unravel(first, tuple(exact.shape))
        return Comparison(False, (
            f"{label}: {bad} of {flat_exact.numel()} elements exceed atol={tol.atol:g}, rtol={tol.rtol:g} and {k:g} x "
            f"the reference's rms rounding error among elements of their magnitude"
            f"{' or its own spread' if spread is not None else ''}; max abs error {worst:.3g}; "
            f"first at index {where}: got {float(flat_out[first]):.6g}, expected {float(flat_exact[first]):.6g}"),
            worst, None, None), rms
    if flat_spread is not None:
        norm = max(norm, float(torch.linalg.vector_norm(flat_spread.to(torch.float64))))
    whole = Tolerance(math.inf, tol.rtol, tol.max_rel_l2, k * norm)  # elementwise above; non-finite and normwise here
    return compare_tensor(out64, exact, whole, label, fused=False), rms


class RoundingAllowance:
    """The second opinion of one job (``judge``), for every failed comparison of its trials, coverage trial and
    checked timed calls; what passed by it (``summary``, ``note``)."""

    def __init__(self, reference, policy, k: float | None):
        self.reference, self.policy, self.k = reference, policy, k
        self.model = None  # the float64 copy of the reference, made on first use
        self.unavailable = ""  # why the float64 reference cannot be computed, once it failed
        self.passed: list[str] = []
        self.rms = 0.0

    def exact(self, saved: list) -> list:
        """The reference's outputs on `saved` in float64 (its float64 copy made on first use)."""
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
                exact = self.exact(saved)
            except Exception as exc:  # an op without float64 support, out of memory
                self.model = None
                self.unavailable = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        if self.unavailable:
            return Comparison(False, f"{comparison.reason} (no second opinion against a float64 reference: "
                                     f"{self.unavailable})", comparison.max_abs_err, comparison.max_rel_err,
                              comparison.rel_l2)
        spreads = None  # the outputs' own rounding (`perturbed_spread`): only where the magnitude classes' fail
        try:
            outs, worst = as_tensor_list(output), 0.0
            for i, (out, ref, ex) in enumerate(zip(outs, refs, exact)):
                label = "output" if len(refs) == 1 else f"output #{i}"
                tol = self.policy.tolerance_for(ref.dtype)
                if compare_tensor(out, ref, tol, label).ok:
                    continue
                second, rms = compare_with_allowance(out, ref, ex, tol, self.k, label)
                if not second.ok:
                    spreads = self._spreads(saved) if spreads is None else spreads
                    if spreads:
                        second, rms = compare_with_allowance(out, ref, ex, tol, self.k, label, spreads[i])
                worst = max(worst, rms)
                if not second.ok:
                    return Comparison(False, f"{comparison.reason} (beyond the fp32 reference's own rounding too: "
                                             f"{self.k:g} x its rms error {rms:.3g} against a float64 reference"
                                             f"{SPREAD_NOTE if spreads else ''})",
                                      comparison.max_abs_err, comparison.max_rel_err, comparison.rel_l2)
        finally:
            scrub(exact + (spreads or []))
        self.passed.append(where)
        self.rms = max(self.rms, worst)
        return Comparison(True, "", comparison.max_abs_err, comparison.max_rel_err, comparison.rel_l2)

    def _spreads(self, saved: list) -> list:
        """`perturbed_spread` of the reference on `saved`; [] where it cannot run (out of memory): the magnitude
        classes' allowance alone then stands."""
        try:
            return perturbed_spread(self.reference, saved)
        except Exception:  # noqa: BLE001 - the first opinion's failure stands, with its own reason
            return []

    def summary(self) -> dict:
        """``guards["rounding_allowance"]``: where a comparison passed by the second opinion, the largest rms error
        of the reference over a whole output met there and K times it (per element the allowance is K times the rms
        of its magnitude class: ``compare_with_allowance``)."""
        return {"trials": list(self.passed), "k": self.k, "reference_rms_error": self.rms,
                "allowance": self.k * self.rms}

    def note(self) -> str:
        return (f"passed within the fp32 reference's own rounding ({self.k:g} x its rms error among elements of "
                f"their magnitude or each element's spread under rounding-sized perturbations, {self.rms:.3g} over "
                f"the whole output, against a float64 reference) at "
                f"{', '.join(self.passed)}")
