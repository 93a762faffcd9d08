"""Output comparison for the correctness gate: shapes, dtypes, non-finite values and per-dtype tolerances."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from fitness.comparison.fused_compare import fused_stats
from fitness.comparison.policy import PrecisionPolicy, Tolerance


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_err: float | None = 0.0  # None: no error measured (outputs of another shape, dtype or count)
    max_rel_err: float | None = 0.0
    rel_l2: float | None = 0.0

    def worst(self, other: "Comparison") -> "Comparison":
        """The comparison that reports the larger errors; a failure always wins."""
        if self.ok != other.ok:
            return self if not self.ok else other
        return self if self.max_abs_err >= other.max_abs_err else other


def mismatch(reason: str) -> Comparison:
    """A failure before any element is compared (another type, shape, dtype or number of outputs): no error
    figures, so no verdict says "max abs err 0" of an output it could not compare."""
    return Comparison(False, reason, None, None, None)


def as_tensor_list(output) -> list:
    """forward's return value as a list: a tensor, or a tuple/list of them."""
    if isinstance(output, (tuple, list)):
        return list(output)
    return [output]


def _nonfinite_mismatch(out: torch.Tensor, ref: torch.Tensor) -> str:
    """Why non-finite values of `out` and `ref` differ ("" when they match); called only where either has one."""
    out_bad, ref_bad = ~torch.isfinite(out), ~torch.isfinite(ref)
    same_nan = torch.isnan(out) & torch.isnan(ref)
    same_inf = torch.isinf(out) & torch.isinf(ref) & (out == ref)
    mismatched = (out_bad | ref_bad) & ~(same_nan | same_inf)
    count = int(mismatched.sum())
    if count == 0:
        return ""
    n_nan = int((torch.isnan(out) & ~torch.isnan(ref)).sum())
    first = tuple(int(i) for i in torch.nonzero(mismatched)[0])
    return (f"{count} non-finite values differ from the reference ({n_nan} NaN where the reference is finite); "
            f"first at index {first}: got {out[first].item()}, expected {ref[first].item()}")


CHUNK_ELEMENTS = 1 << 26  # compared this many elements at a time: 512 MiB per float64 temporary


def _chunk_errors(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple:
    """(absolute error, reference magnitude, finite mask of the reference, out-of-tolerance mask) of one chunk, in
    float64 on the reference's device."""
    out64 = out.to(device=ref.device, dtype=torch.float64)
    ref64 = ref.to(torch.float64)
    finite = torch.isfinite(ref64)
    diff = torch.where(finite, (out64 - ref64).abs(), 0.0)
    scale = torch.where(finite, ref64.abs(), 0.0)
    return out64, ref64, finite, diff, scale, diff > tol.atol + tol.rtol * scale


def _chunk_stats(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    out64, ref64, finite, diff, scale, bad = _chunk_errors(out, ref, tol)
    return torch.stack([(~torch.isfinite(out64)).any().to(torch.float64), (~finite).any().to(torch.float64),
                        diff.max(), (diff / scale.clamp_min(max(tol.atol, 1e-30))).max(),
                        torch.where(finite, ref64, 0.0).square().sum(), diff.square().sum(),
                        bad.sum().to(torch.float64)])


def unravel(flat: int, shape: tuple) -> tuple:
    """The index in `shape` of flat position `flat` (row-major)."""
    index = []
    for n in reversed(shape):
        index.append(flat % n)
        flat //= n
    return tuple(reversed(index))


def _torch_stats(flat_out: torch.Tensor, flat_ref: torch.Tensor, tol: Tolerance) -> tuple:
    """(the seven statistics, first_bad(): the flat index of the first element out of tolerance) in torch, a chunk
    of ``CHUNK_ELEMENTS`` at a time, read back in one transfer."""
    count = flat_ref.numel()
    chunks = torch.stack([_chunk_stats(flat_out[i:i + CHUNK_ELEMENTS], flat_ref[i:i + CHUNK_ELEMENTS], tol)
                          for i in range(0, count, CHUNK_ELEMENTS)])
    stats = torch.stack([chunks[:, 0].max(), chunks[:, 1].max(), chunks[:, 2].max(), chunks[:, 3].max(),
                         chunks[:, 4].sum().sqrt(), chunks[:, 5].sum().sqrt(), chunks[:, 6].sum()]).tolist()

    def first_bad() -> int:
        chunk = next(i for i, n in enumerate(chunks[:, 6].tolist()) if n)  # a second read, on failure only
        return _first_bad_in(flat_out, flat_ref, tol, chunk * CHUNK_ELEMENTS, (chunk + 1) * CHUNK_ELEMENTS)
    return stats, first_bad


def _first_bad_in(flat_out: torch.Tensor, flat_ref: torch.Tensor, tol: Tolerance, start: int, end: int) -> int:
    return start + int(torch.nonzero(_chunk_errors(flat_out[start:end], flat_ref[start:end], tol)[-1])[0][0])


def _statistics(flat_out: torch.Tensor, flat_ref: torch.Tensor, tol: Tolerance, fused: bool | None) -> tuple:
    """(out non-finite, ref non-finite, max abs, max rel, ||ref||, ||out - ref||, elements out of tolerance),
    whether non-finite values may differ (False: the fused pass counted none that do), and first_bad()."""
    if fused is not False:
        found = fused_stats(flat_out, flat_ref, tol, interpreter=bool(fused))
        if found is not None:
            v = found.values
            stats = [v["out_nonfinite"], v["ref_nonfinite"], v["max_abs"], v["max_rel"], math.sqrt(v["ref_sq"]),
                     math.sqrt(v["diff_sq"]), v["bad"]]
            return stats, v["nonfinite_mismatch"] > 0, lambda: _first_bad_in(
                flat_out, flat_ref, tol, *found.first_bad_span(flat_ref.numel()))
    stats, first_bad = _torch_stats(flat_out, flat_ref, tol)
    return stats, True, first_bad


def compare_tensor(out, ref: torch.Tensor, tol: Tolerance, label: str = "output",
                   fused: bool | None = None) -> Comparison:
    """The comparison's statistics are computed on the device in float64 and read back in one transfer (every read
    is a synchronisation, and on a GPU that other processes share each one waits for their work too): in one pass
    by the kernel of ``fitness.comparison.fused_compare`` on a GPU (`fused` None; True: also under Triton's interpreter,
    for the tests; False: never), else in torch a chunk of ``CHUNK_ELEMENTS`` at a time (a KernelBench output of 7.5 GB
    would need 15 GB per float64 temporary at once). Both give the same verdict and message."""
    if not isinstance(out, torch.Tensor):
        return mismatch(f"{label} is a {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return mismatch(f"{label} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return mismatch(f"{label} has dtype {out.dtype}, expected {ref.dtype}")
    flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
    count = flat_ref.numel()
    if count:
        stats, nonfinite_may_differ, first_bad = _statistics(flat_out, flat_ref, tol, fused)
    else:
        stats, nonfinite_may_differ = [0.0] * 7, False
    out_nonfinite, ref_nonfinite, max_abs, max_rel, ref_norm, diff_norm, n_bad = stats
    if (out_nonfinite or ref_nonfinite) and nonfinite_may_differ:
        nonfinite = _nonfinite_mismatch(out.detach().to(ref.device), ref.detach())
        if nonfinite:
            return Comparison(False, f"{label}: {nonfinite}", float("inf"), float("inf"), float("inf"))
    rel_l2 = diff_norm / ref_norm if ref_norm > 0 else max_abs
    if n_bad:
        flat = first_bad()
        return Comparison(False, (
            f"{label}: {int(n_bad)} of {count} elements exceed atol={tol.atol:g}, rtol={tol.rtol:g}; "
            f"max abs error {max_abs:.3g}; first at index {unravel(flat, tuple(ref.shape))}: got "
            f"{float(flat_out[flat]):.6g}, expected {float(flat_ref[flat]):.6g}"), max_abs, max_rel, rel_l2)
    if tol.max_rel_l2 is not None and tol.l2_slack and diff_norm > tol.max_rel_l2 * ref_norm + tol.l2_slack:
        return Comparison(False, (f"{label}: normwise error ||out - ref|| = {diff_norm:.3g} exceeds the policy's "
                                  f"bound {tol.max_rel_l2:g} x ||ref|| + {tol.l2_slack:.3g} = "
                                  f"{tol.max_rel_l2 * ref_norm + tol.l2_slack:.3g} (every element may be within "
                                  f"atol/rtol; the output as a whole is not)"), max_abs, max_rel, rel_l2)
    if tol.max_rel_l2 is not None and not tol.l2_slack and rel_l2 > tol.max_rel_l2:
        return Comparison(False, (f"{label}: normwise relative error ||out - ref|| / ||ref|| = {rel_l2:.3g} "
                                  f"exceeds the policy's bound {tol.max_rel_l2:g} (every element may be within "
                                  f"atol/rtol; the output as a whole is not)"),
                          max_abs, max_rel, rel_l2)
    return Comparison(True, "", max_abs, max_rel, rel_l2)


def compare_outputs(output, refs: list, policy: PrecisionPolicy, normwise: bool = True) -> Comparison:
    """The candidate's outputs against the reference's under the policy's tolerances: elementwise (atol, rtol) and,
    unless `normwise` is False, the normwise bound (max_rel_l2) too."""
    outs = as_tensor_list(output)
    if len(outs) != len(refs):
        return mismatch(f"forward returned {len(outs)} outputs, the reference returns {len(refs)}")
    result = Comparison(True)
    for i, (out, ref) in enumerate(zip(outs, refs)):
        label = "output" if len(refs) == 1 else f"output #{i}"
        tol = policy.tolerance_for(ref.dtype)
        one = compare_tensor(out, ref, tol if normwise else replace(tol, max_rel_l2=None), label)
        if not one.ok:
            return one
        result = result.worst(one)
    return result


def _same_bits(a: torch.Tensor, b: torch.Tensor):
    """Whether two tensors hold identical values (NaN equal to NaN): False, or a 0-d tensor still on the device."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return ((a == b) | (torch.isnan(a) & torch.isnan(b))).all()
    return (a == b).all()


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors hold identical values (NaN equal to NaN)."""
    return bool(_same_bits(a, b))


def changed_inputs(inputs: list, saved: list) -> list[int]:
    """Indices of tensor inputs whose values differ from the saved copy taken before the candidate ran (read back
    from the device in one transfer)."""
    checks = [(i, _same_bits(a, b)) for i, (a, b) in enumerate(zip(inputs, saved)) if isinstance(a, torch.Tensor)]
    on_device = [c for _, c in checks if isinstance(c, torch.Tensor)]
    same = iter(torch.stack(on_device).tolist() if on_device else [])
    return [i for i, c in checks if not (next(same) if isinstance(c, torch.Tensor) else c)]
