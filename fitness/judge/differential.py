"""The differential trial: an in-distribution change, the candidate's difference of outputs against the exact one
(inside the worker's correctness gate).

The coverage trial's change is an extreme outlier, so a kernel that estimates for "typical" inputs (a softmax's
normaliser guessed from the row length, a GEMM linearised) and computes exactly only where an element is far out
passes it, and the ordinary trials too when the estimate is within the tolerance (issue 63, class 3 by value: level1/23
at its full row length). Here each input the output depends on gets a change no outlier test can spot: a block of one
row (1/``BLOCK_SHARE`` of its last dimension) is set to values of the draw's own upper (or lower) decile, each an
ordinary value of the draw (zeros kept: a structural zero stays one; a symmetric draw's mirror image changed alike;
discrete inputs and rows that are distributions left alone). The candidate runs on the draw and on the changed draw
(two calls, each checked like a trial and compared with the reference), and its difference of outputs must match the
reference's difference computed in float64: ||d_out - d_exact|| <= r ||d_exact|| + K (||e|| + ||e'||), r the
largest of 1 % (``DIFFERENCE_RTOL``) and the policy's rtol and max_rel_l2, e the fp32 reference's own rounding on
each draw (K: ``fitness.rounding_allowance``). An estimate that does not follow the change misses a share of d_exact
far above 1 %; an honest kernel's rounding barely moves between two draws that differ in one block. An output whose
exact difference is within K times that rounding is not judged so. One whose exact difference is below
``MIN_SHARE`` of its norm is judged only for following ``FOLLOW_SHARE`` of it, over the elements the change moves
(the changed row's, typically): ||d_out - d_exact|| <= FOLLOW_SHARE ||d_exact|| + K (||e|| + ||e'||), each norm
over those elements, where the move is beyond that rounding and ``RESOLVED_ULPS`` fp32 ulps of the output's largest
element: a global reduction's honest reordering is kept, an answer that ignores the input is not (KernelBench
level2/45: the logsumexp of a sigmoid's GEMM, which a constant matched within the tolerance for every draw and every
single element's change). `moved`: the move in units of the larger of the rounding and ``MIN_SHARE`` of the norm (at
most 1: judged only for following).
"""
from __future__ import annotations

import torch

from fitness.comparison.correctness import as_tensor_list, compare_outputs
from fitness.judge.coverage import discrete, domain, sample, symmetric
from fitness.judge.inputs import clone_all, scrub

DIFFERENTIAL_SEED = 60_000  # the trial's inputs and its block's choice: input_seed + this
BLOCK_SHARE = 8  # the block changed is 1/this of the last dimension of one row
DECILE = 0.1  # the new values come from this share of the draw's largest (or smallest) values
DIFFERENCE_RTOL = 1e-2  # the difference must follow within this share of its norm (or the policy's, where looser)
# an output the change moves by less than this share of its norm is not judged: a global reduction's honest
# reordering (atomics) is about 1e-6 of the output (estimated), so a bound of 1e-2 of a smaller move could reject it
MIN_SHARE = 1e-3
# ... but where it moves beyond the reference's rounding there, half of such a move must be followed: an answer that
# ignores the input (a constant, for level2/45's bounded logsumexp, which no single element moves a tolerance)
# follows none of it
FOLLOW_SHARE = 0.5
RESOLVED_ULPS = 64  # a move of fewer fp32 ulps of the output's largest element is never judged
EPS32 = 2.0 ** -23


def change_block(x: torch.Tensor, generator: torch.Generator) -> str:
    """Set one row's block of `x` (in place) to values of its own upper or lower decile, its mirror image too where
    the draw's matrices are symmetric; returns where, '' when the input is not changed (not contiguous, discrete, one
    element, rows that are distributions)."""
    if not (x.is_floating_point() and x.is_contiguous() and x.numel() > 1 and x.dim() >= 1) or discrete(x):
        return ""
    nonneg, distribution = domain(x)
    if distribution:
        return ""
    mirrored = symmetric(x)
    rows = x.view(-1, x.shape[-1])
    length = max(1, rows.shape[1] // BLOCK_SHARE)
    row = int(torch.randint(rows.shape[0], (1,), generator=generator))
    start = int(torch.randint(rows.shape[1] - length + 1, (1,), generator=generator))
    pool = sample(x).sort().values
    count = max(1, int(pool.numel() * DECILE))
    upper = nonneg or bool(torch.rand((), generator=generator) < 0.5)
    pool = pool[-count:] if upper else pool[:count]
    with torch.no_grad():
        old = rows[row, start:start + length]
        new = pool[torch.randint(count, (length,), generator=generator).to(pool.device)].to(x.dtype)
        old.copy_(torch.where(old == 0, old, new))  # a structural zero stays one
        if mirrored:
            n = x.shape[-1]
            matrices = x.view(-1, n, n)
            matrices[row // n, start:start + length, row % n] = matrices[row // n, row % n, start:start + length]
    return f"row {row}, [{start}:{start + length}] set to its {'upper' if upper else 'lower'} decile's values"


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((a - b).reshape(-1)))


def differential_trial(reference, exact, judged_call, prepare, buffers: list, wanted, names: list, policy,
                       generator: torch.Generator, k: float, allowance=None) -> dict:
    """Run the differential trial on `buffers` (a draw the candidate has not seen) for the inputs `wanted` (None:
    every floating-point tensor). `exact(inputs)`: the reference's outputs in float64; `judged_call`, `prepare` and
    `allowance` as for the coverage trial (``fitness.judge.coverage.coverage_trial``). Returns {"changed": {name:
    where}, "moved": [per output: ||d_exact|| over the allowance for rounding]}, with "failure" and the errors where
    the candidate failed, or {"not_run": why}: the caller gives the verdict."""
    def name(i: int) -> str:
        return names[i] if i < len(names) else f"input {i}"

    changed, summary = clone_all(buffers), {"changed": {}}
    for i, x in enumerate(changed):
        if isinstance(x, torch.Tensor) and (wanted is None or i in wanted) and (where := change_block(x, generator)):
            summary["changed"][name(i)] = where
    if not summary["changed"]:
        return {"not_run": "no input the output depends on can be changed within its draw's values"}
    outputs, fp32, exacts = [], [], []
    changes = "; ".join(f"{n} {w}" for n, w in summary["changed"].items())
    for label, inputs in (("the draw", buffers), (f"the draw with {changes}, values the draw itself holds", changed)):
        where = f"differential trial, {label}"
        fresh = prepare(inputs)
        output = as_tensor_list(judged_call(fresh, inputs, where, name="differential_call"))
        with torch.no_grad():
            refs = as_tensor_list(reference(*inputs))
        comparison = compare_outputs(output, refs, policy)
        if allowance is not None:
            comparison = allowance.judge(comparison, output, refs, inputs, where)
        dtypes = [r.dtype for r in refs]
        if not comparison.ok:
            scrub(as_tensor_list(output) + refs + [t for t in fresh if isinstance(t, torch.Tensor)])
            return {**summary, "failure": f"{where}: {comparison.reason}", "max_abs_err": comparison.max_abs_err,
                    "max_rel_err": comparison.max_rel_err, "rel_l2": comparison.rel_l2}
        try:  # the judge's own float64 work: out of memory, or an op without float64, is no verdict on the kernel
            outputs.append([o.detach().to(torch.float64) for o in output])
            fp32.append([r.detach().to(torch.float64) for r in refs])
            exacts.append(exact(inputs))
        except Exception as exc:  # noqa: BLE001
            scrub([t for each in outputs + fp32 + exacts for t in each])
            return {**summary, "not_run": f"no float64 reference: {type(exc).__name__}: "
                                          f"{(str(exc).strip().splitlines() or [''])[0][:160]}"}
        finally:
            scrub(as_tensor_list(output) + refs + [t for t in fresh if isinstance(t, torch.Tensor)])
    summary["moved"] = []
    for j, ((out0, out1), (ref0, ref1), (ex0, ex1), dtype) in enumerate(zip(zip(*outputs), zip(*fp32), zip(*exacts),
                                                                             dtypes)):
        if not all(bool(torch.isfinite(t).all()) for t in (ref0, ref1, ex0, ex1)):
            summary["moved"].append(None)  # non-finite values: the trials' comparison is the judge there
            continue
        tol = policy.tolerance_for(dtype)
        moved = _distance(ex1, ex0)
        rounding = k * (_distance(ref0, ex0) + _distance(ref1, ex1))
        floor = max(rounding, MIN_SHARE * float(torch.linalg.vector_norm(ex1.reshape(-1))))
        summary["moved"].append(round(moved / floor, 1) if floor else None)
        if moved > floor:
            error = _distance(out1 - out0, ex1 - ex0)
            bound = max(tol.max_rel_l2 or 0.0, tol.rtol, DIFFERENCE_RTOL) * moved + rounding
        else:  # a tiny share of the output: judged only for following half of the move, where the move is
            moving = ex1 != ex0
            local = k * (_distance(ref0[moving], ex0[moving]) + _distance(ref1[moving], ex1[moving]))
            if moved <= max(local, RESOLVED_ULPS * EPS32 * float(ex1.abs().max())):
                continue  # a move within the reference's own rounding where it moves (or fp32's resolution)
            error = _distance((out1 - out0)[moving], (ex1 - ex0)[moving])
            bound = FOLLOW_SHARE * moved + local
        if error > bound:
            label = "output" if len(outputs[0]) == 1 else f"output #{j}"
            summary.update(
                failure=f"differential trial ({changes}, values the draw itself holds): the {label}'s change did not "
                        f"follow the exact one: "
                        f"||d_out - d_exact|| = {error:.3g} > {bound:.3g} ({error / moved:.3g} of ||d_exact||"
                        f"{', a move below ' + format(MIN_SHARE, 'g') + ' of the output' if moved <= floor else ''})"
                        f". Each call was within the tolerance, but a kernel must compute the problem's result, not "
                        f"an estimate that holds for typical inputs (a constant, an answer that ignores the input)",
                max_abs_err=float((out1 - out0 - (ex1 - ex0)).abs().max()), max_rel_err=None,
                rel_l2=error / moved)
            break
    scrub([t for each in outputs + fp32 + exacts for t in each])
    return summary
