"""The coverage trial: inputs built so that skipped work shows (inside the worker's correctness gate).

A kernel that reads only a sample of its input (every k-th row) and rescales passes ordinary trials on i.i.d.
inputs: the sample's estimate is within the policy's tolerance. The coverage trial changes ONE element of an input
the output depends on (``fitness.problems.dependence``) by an amount scaled from the reference's own response, so that
the reference's output moves by ``TARGET`` times the policy's tolerance: that element then dominates the output
elements it affects. A kernel that skips the element misses the whole move; one that reads it but rescales a
sample (k/(k-1) for skipping 1/k of the work) overshoots by 1/(k-1) of the move, which is more than the policy's
relative tolerance (1 % for ``triton``) for every k up to 100 once the move dwarfs the rest of the output. So a
rescaled subsample fails whatever its fraction, and one that does not rescale is either caught by the ordinary
trials or, skipping at most about the tolerance's share of the work, is within the tolerance on every input.

The element and the sign of the change come from the job's secret input seed; the change keeps the input in its
domain and the structure the draw states: added (never subtracted) where the input is nonnegative, for rows that are
distributions (nonnegative, summing to 1 along the last dimension) the row is renormalised, where the draw's
matrices are exactly symmetric (no random draw is by chance: level1/13) the element's mirror image across the
diagonal changes alike, and an element that is exactly zero is never the one changed (a structural zero, level1/14's
lower triangle; a random draw holds no exact zeros to speak of), so a kernel that reads one triangle is judged on
what the problem states; an integer input, or one of small whole numbers
(labels, masks), is not changed (reported as not covered). The amount starts from the input's mean magnitude
and grows (the response's exponent estimated from the last two calls) until the move is reached, the output stays
finite and the amount representable; an element whose change moves nothing or saturates (a clamp, a max) is
replaced by another. Per input: a few
reference calls to calibrate (their outputs scrubbed before the candidate runs), then one candidate call checked
like a trial (guards, judge state, inputs unchanged) and the reference on a saved copy of its inputs after it.

Where the policy allows reduced-precision matmuls (TF32) the amount must not turn that allowed precision into a
failure: a huge element makes a row's logits a multiple of one column of weights, and values that differ in fp32 can
round to the same TF32 number (a softmax's argmax becomes a tie the fp32 reference does not have). So the reference
is computed once more at the policy's own precision (`reduced`, by default a ``TF32Reference``, ``fitness.judge.tf32``:
under a TF32 policy the reference with every matmul's operands rounded to TF32, to nearest and toward zero, on any
device; None elsewhere) on the changed input; while one of them is not within the policy of the fp32 reference at
the output elements the change moves (the others are as in an ordinary trial, which judges their precision) the
amount is divided by ``SHRINK`` (then bisected), keeping the move at least ``USABLE`` tolerances; where no such
amount passes, or the one that passes moves the output less than ``ENOUGH`` (an element whose weights sum to nearly
nothing), another element is tried, the largest move kept, and an input none of ``PRECISION_POSITIONS`` elements
passes for is not covered.

Both comparisons of the trial (the reference at the policy's precision against the fp32 one, and the candidate
against the reference) are elementwise (atol, rtol), without the policy's normwise bound: the change concentrates the
output's norm in the elements it moves, so the normwise bound would measure their allowed rounding against a norm
they alone make (an example: docs/measurements.md). The trial asks whether the output follows the move, which the
elementwise tolerance answers: a skipped element misses the move at some element, a rescaled sample overshoots it there.
The ordinary trials keep the normwise bound.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from fitness.comparison.correctness import as_tensor_list, compare_outputs, unravel
from fitness.judge.inputs import scrub
from fitness.judge.tf32 import TF32Reference

TARGET = 1e5  # the reference's output moves by this many times the policy's tolerance (elementwise, at its worst)
ENOUGH = 2e4  # calibration stops once the move is this large (1 % relative tolerance: 1e4 needed for k = 100)
OVERSHOOT = 100.0  # a move this far past TARGET is brought back (huge values only cost an honest kernel precision)
USABLE = 10.0  # a smaller move than this covers nothing: the input is reported as not covered
MAX_REFERENCE_CALLS = 24  # per input, to calibrate the amount (3-4 when the first element responds)
POSITIONS = 12  # elements tried per input when a change moves nothing or saturates (a hinge: half the elements)
SATURATED = 0.1  # the move grows slower than amount ** this: the element's effect saturates
DISCRETE_MAX = 1000  # an input of whole numbers at most this large is discrete (labels, masks): not changed
CHUNK = 1 << 24
SAMPLE = 1 << 20  # elements read to judge an input's domain and scale
SAMPLE_ROWS = 1024
SHRINK = 10.0  # the amount is divided by this while the reference at the policy's precision disagrees
PRECISION_STEPS = 16  # amounts tried per input at the policy's precision (two reference calls each)
CLOSE = 1.2  # the bisection between an amount moving too little and one failing at the precision stops here
PRECISION_POSITIONS = 4  # elements tried per input when no amount passes at the policy's precision (an element may
# have none: a column's top weights lying closer than TF32 resolves; docs/measurements.md)


def move_ratio(outputs: list, base: list, policy) -> float:
    """The largest change of an output element in units of the policy's tolerance at the base output; inf when an
    element finite in the base is not finite any more."""
    worst = 0.0
    for out, ref in zip(outputs, base):
        tol = policy.tolerance_for(ref.dtype)
        flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
        for start in range(0, flat_ref.numel(), CHUNK):
            o = flat_out[start:start + CHUNK].to(torch.float64)
            r = flat_ref[start:start + CHUNK].to(torch.float64)
            finite = torch.isfinite(r)
            if not bool(torch.isfinite(o[finite]).all()):
                return math.inf
            ratio = ((o - r).abs() / (tol.atol + tol.rtol * r.abs()))[finite]
            worst = max(worst, float(ratio.max()) if ratio.numel() else 0.0)
    return worst


class Change:
    """One element of one input changed in place (and restored): its row renormalised where rows are
    distributions, its mirror image across the diagonal changed alike where the matrices are symmetric."""

    def __init__(self, tensor: torch.Tensor, flat: int, sign: float, distribution: bool, symmetric: bool = False):
        self.tensor, self.flat, self.sign, self.distribution = tensor, flat, sign, distribution
        self.row_len = tensor.shape[-1] if tensor.dim() else 1
        self.row = flat // self.row_len
        self.saved = self._view()[self.row].clone()
        self.old = float(tensor.reshape(-1)[flat])
        self.new = self.old
        mirror = _mirror(flat, self.row_len) if symmetric else flat
        self.mirror = None if mirror == flat else (mirror, float(tensor.reshape(-1)[mirror]))

    def _view(self) -> torch.Tensor:
        return self.tensor.view(-1, self.row_len)

    def apply(self, amount: float) -> None:
        with torch.no_grad():
            row = self._view()[self.row]
            row.copy_(self.saved)
            row[self.flat % self.row_len] += self.sign * amount
            if self.distribution:
                row /= row.sum()
            if self.mirror is not None:
                self.tensor.view(-1)[self.mirror[0]] = self.tensor.view(-1)[self.flat]
        self.new = float(self.tensor.reshape(-1)[self.flat])

    def restore(self) -> None:
        with torch.no_grad():
            self._view()[self.row].copy_(self.saved)
            if self.mirror is not None:
                self.tensor.view(-1)[self.mirror[0]] = self.mirror[1]

    def where(self) -> tuple:
        return unravel(self.flat, tuple(self.tensor.shape))


def _mirror(flat: int, n: int) -> int:
    """The flat index of element (j, i) of the (n, n) matrix that holds element (i, j) at `flat`."""
    matrix, within = divmod(flat, n * n)
    return matrix * n * n + (within % n) * n + within // n


def symmetric(x: torch.Tensor) -> bool:
    """Whether the draw's matrices (its last two dimensions, square) equal their transposes exactly: no random draw
    is so by chance, so the problem states it (level1/13's inputs), and a kernel may read one triangle."""
    return (x.dim() >= 2 and x.shape[-1] == x.shape[-2] > 1 and x.is_contiguous()
            and bool(torch.equal(x[..., 0, :], x[..., :, 0]))  # first rows against columns: no full-size temporary
            and bool(torch.equal(x, x.transpose(-1, -2))))  # for an input that is not symmetric


def sample(x: torch.Tensor) -> torch.Tensor:
    """At most SAMPLE elements of `x`, evenly strided: what the checks of its domain read (no full-size temporary)."""
    flat = x.reshape(-1)
    return flat[::max(1, flat.numel() // SAMPLE)]


def domain(x: torch.Tensor) -> tuple:
    """(nonnegative, rows are distributions) of an input draw, from a sample of its elements and rows."""
    nonneg = bool((sample(x) >= 0).all())
    rows = x.reshape(-1, x.shape[-1])[:SAMPLE_ROWS] if x.dim() >= 1 and x.shape[-1] > 1 else None
    distribution = nonneg and rows is not None and bool(
        torch.allclose(rows.sum(-1, dtype=torch.float64), torch.ones((), dtype=torch.float64, device=x.device),
                       atol=1e-3))
    return nonneg, distribution


def discrete(x: torch.Tensor) -> bool:
    """Whether a floating-point input holds only small whole numbers (labels such as +-1, masks, classes): no
    amount can be added to one of its elements without leaving its domain."""
    part = sample(x)
    return bool(((part == part.round()) & (part.abs() <= DISCRETE_MAX)).all())


class Calibrated(NamedTuple):
    """What ``calibrate`` chose for one input: the change (None: not covered), the reference's move in tolerance
    units, the amount; `shrunk_from`: the amount before it was shrunk for the policy's precision; `imprecise`: no
    amount moving the output USABLE tolerances passed at the policy's precision."""
    change: Change | None
    moved: float
    amount: float
    shrunk_from: float | None = None
    imprecise: bool = False


def calibrate(reference, inputs: list, index: int, base: list, policy, generator: torch.Generator,
              reduced=None) -> Calibrated:
    """The change of input `index` with the largest move found, up to TARGET, and an amount at which the reference
    at the policy's own precision (`reduced(reference, inputs, policy)`, None: the fp32 one) is within the policy of
    the fp32 reference where the change moves the output; another element (PRECISION_POSITIONS at most) where no
    amount passes, or where the amount that passes moves the output less than ENOUGH (the element's column of
    weights sums to nearly nothing: its TF32 rounding is a large part of the move), the largest move kept; change
    None when no element tried moves the output. `reduced` None: a ``TF32Reference`` of its own."""
    reduced = reduced or TF32Reference()
    best = None
    for _ in range(PRECISION_POSITIONS):
        found = Calibrated(*_largest_move(reference, inputs, index, base, policy, generator))
        if found.change is None or found.moved < USABLE:
            return best or found
        found = _at_policy_precision(reference, inputs, found, base, policy, reduced)
        if found.imprecise:
            continue
        if found.shrunk_from is None or found.moved >= ENOUGH:
            return found  # the element's own move, or one large enough, at the policy's precision
        if best is None or found.moved > best.moved:
            best = found
    return best or found


def moved_elements(outputs: list, base: list) -> list:
    """The elements of each output that differ from the base output, flattened (NaN where the base is NaN counts
    as unmoved): where a change of one input element shows."""
    kept = []
    for out, ref in zip(outputs, base):
        flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
        kept.append(torch.nonzero((flat_out != flat_ref) & ~(flat_out.isnan() & flat_ref.isnan())).reshape(-1))
    return kept


def _at_moved(tensors: list, kept: list) -> list:
    return [t.detach().reshape(-1)[k] for t, k in zip(tensors, kept)]


def _at_policy_precision(reference, inputs: list, found: Calibrated, base: list, policy, reduced) -> Calibrated:
    """`found`, its amount divided by SHRINK (then bisected) until the reduced-precision reference passes against
    the fp32 one at the output elements the change moves, with the move still at least USABLE; imprecise when none
    does. Unchanged where `reduced` gives None."""
    change, amount, moved = found.change, found.amount, found.moved
    high = low = None  # the smallest amount failing at the precision, the largest moving too little
    for _ in range(PRECISION_STEPS):
        change.apply(amount)
        try:
            coarse = reduced(reference, inputs, policy)
            if coarse is None:
                return found
            coarse = [as_tensor_list(each) for each in coarse]
            with torch.no_grad():
                outputs = as_tensor_list(reference(*inputs))
            moved = move_ratio(outputs, base, policy)
            kept = moved_elements(outputs, base)  # the unmoved elements' precision is the ordinary trials' concern
            ok = all(compare_outputs(_at_moved(each, kept), _at_moved(outputs, kept), policy, normwise=False).ok
                     for each in coarse)
            scrub([t for each in coarse for t in each] + outputs)
        finally:
            change.restore()
        if math.isfinite(moved) and moved >= USABLE and ok:
            return found._replace(moved=moved, amount=amount,
                                  shrunk_from=None if amount == found.amount else found.amount)
        if math.isfinite(moved) and moved < USABLE:
            low = amount
        else:
            high = amount
        if high is None or (low is not None and high / low < CLOSE):
            break
        amount = high / SHRINK if low is None else math.sqrt(high * low)
    return Calibrated(None, 0.0, 0.0, imprecise=True)


def _largest_move(reference, inputs: list, index: int, base: list, policy, generator: torch.Generator) -> tuple:
    """(the change of input `index`, the move it makes in tolerance units, the amount) with the largest move found,
    up to TARGET; (None, 0, 0) when no element tried moves the output. An element whose change moves nothing or
    saturates one way is tried the other way before another element (a softmax's element lowered only loses its own
    small share; raised, it takes the row: a guessed sum let through when the first elements drawn went down)."""
    x = inputs[index]
    nonneg, distribution = domain(x)
    mirrored = not distribution and symmetric(x)
    scale = float(sample(x).abs().to(torch.float64).mean()) or 1.0
    cap = math.sqrt(torch.finfo(x.dtype).max) * (scale if distribution else 1.0)
    best, calls = (None, 0.0, 0.0), 0
    for _ in range(POSITIONS):
        flat = int(torch.randint(x.numel(), (1,), generator=generator))
        sign = 1.0 if nonneg else (1.0 if torch.rand((), generator=generator) < 0.5 else -1.0)
        if float(x.reshape(-1)[flat]) == 0.0:
            continue  # a structural zero (level1/14's lower triangle): a random draw holds no exact zeros to speak of
        for way in ((sign,) if nonneg else (sign, -sign)):
            change, amount, last, good = Change(x, flat, way, distribution, mirrored), scale * 100, None, 0.0
            while calls < MAX_REFERENCE_CALLS:
                calls += 1
                change.apply(amount)
                with torch.no_grad():
                    outputs = as_tensor_list(reference(*inputs))
                moved = move_ratio(outputs, base, policy)
                scrub(outputs)
                change.restore()
                if math.isinf(moved) or math.isnan(moved):  # overflow: back off towards the last finite amount
                    amount = math.sqrt(amount * good) if good else amount / 1e3
                    continue
                if moved > best[1] or (best[0] is change and ENOUGH <= moved):  # the largest, or back near TARGET
                    best, good = (change, moved, amount), amount
                if moved > OVERSHOOT * TARGET and last is not None and last[1] > 0 and moved != last[1]:
                    exponent = min(max(math.log(moved / last[1]) / math.log(amount / last[0]), 0.25), 4.0)
                    last, amount = None, amount * (TARGET / moved) ** (1 / exponent)  # back to about TARGET
                    continue
                if moved >= ENOUGH or amount >= cap:
                    return best
                if moved == 0 and amount < 1e8 * scale:  # below the output's resolution (a mean of 1e9 elements)?
                    last, amount = None, min(cap, amount * 1e4)
                    continue
                exponent = 1.0
                if last is not None and last[1] > 0:
                    exponent = math.log(max(moved, 1e-300) / last[1]) / math.log(amount / last[0])
                if exponent < SATURATED and best[1] >= USABLE:
                    return best  # a bounded output (a softmax, a norm): as far as it moves
                if moved == 0 or exponent < SATURATED:
                    break  # this element moves nothing this way, or its effect saturates (a clamp)
                exponent = min(max(exponent, 0.25), 4.0)
                last = (amount, moved)
                amount = min(cap, amount * min(max((TARGET / moved) ** (1 / exponent), 2.0), 1e8))
            if calls >= MAX_REFERENCE_CALLS:
                return best
    return best


def coverage_trial(reference, judged_call, buffers: list, wanted: list | None, names: list, policy,
                   generator: torch.Generator, prepare, allowance=None, reduced=None) -> dict:
    """Run the coverage trial on `buffers` (an input draw the candidate has not seen), one candidate call per input in
    `wanted` (None: every floating-point tensor input). `judged_call(inputs, saved, where, name=phase)` calls forward
    with every trial's checks and returns its output; `prepare(buffers)` returns a copy of the inputs (new tensors:
    what the candidate gets, `buffers` never reach it) and poisons the output memory. Returns {"inputs": {name: move
    in tolerance units}, "not_covered": [names]}, with "failure" (the reason) and the errors when the candidate's
    output did not follow: the caller gives the verdict. A failed comparison gets the second opinion of `allowance`
    (``fitness.judge.rounding``), when given. `reduced` computes the reference at
    the policy's own precision (``calibrate``; None: a ``TF32Reference``): "shrunk_for_precision" then names each input
    whose amount was shrunk ({name: [amount found, amount used]}) and "not_covered_at_precision" those no amount passed
    for (in "not_covered" too)."""
    reduced = reduced or TF32Reference()  # one rounded copy of the reference for every input
    tensors = [i for i, x in enumerate(buffers) if isinstance(x, torch.Tensor) and x.numel()
               and (wanted is None or i in wanted)]
    indices = [i for i in tensors if buffers[i].is_floating_point()]

    def name(i: int) -> str:
        return names[i] if i < len(names) else f"input {i}"

    with torch.no_grad():
        base = [o.detach().clone() for o in as_tensor_list(reference(*buffers))]
    chosen, summary = [], {"inputs": {}, "not_covered": [name(i) for i in tensors if i not in indices]}
    for i in indices:
        usable = buffers[i].is_contiguous() and not discrete(buffers[i])
        found = (calibrate(reference, buffers, i, base, policy, generator, reduced) if usable
                 else Calibrated(None, 0.0, 0.0))
        if found.imprecise:
            summary.setdefault("not_covered_at_precision", []).append(name(i))
        if found.change is None or found.moved < USABLE:
            summary["not_covered"].append(name(i))
            continue
        if found.shrunk_from is not None:
            summary.setdefault("shrunk_for_precision", {})[name(i)] = [float(f"{found.shrunk_from:.6g}"),
                                                                      float(f"{found.amount:.6g}")]
        chosen.append((i, found.change, found.moved, found.amount))
    scrub(base)  # no reference output is in memory while the candidate runs
    for i, change, moved, amount in chosen:
        change.apply(amount)
        fresh = prepare(buffers)  # the candidate's: new tensors, as a timed call's; `buffers` stay the judge's
        where = f"coverage trial, {name(i)}{list(change.where())}"
        output = judged_call(fresh, buffers, where, name="coverage_call")
        with torch.no_grad():
            refs = as_tensor_list(reference(*buffers))
        comparison = compare_outputs(output, refs, policy, normwise=False)
        if allowance is not None:
            comparison = allowance.judge(comparison, output, refs, buffers, where)
        scrub(as_tensor_list(output) + refs + [t for t in fresh if isinstance(t, torch.Tensor)])
        change.restore()
        summary["inputs"][name(i)] = round(moved, 1)
        if not comparison.ok:
            summary["failure"] = (
                f"coverage trial: {name(i)}{list(change.where())} changed from {change.old:.6g} to {change.new:.6g}"
                f" (the reference's output moved by up to {moved:.3g}x the policy's tolerance); the candidate's "
                f"output did not follow: {comparison.reason}. A kernel must read every element its output depends "
                f"on: an estimate from a subsample, rescaled or not, is not the problem's result")
            summary.update(max_abs_err=comparison.max_abs_err, max_rel_err=comparison.max_rel_err,
                           rel_l2=comparison.rel_l2)
            return summary
    return summary
