"""An evaluation's verdict for people: in one line, as a run tells its progress (``brief``), and whole, for the
terminal and a notebook (``summary``: the times, the speed-ups against the baselines, the speed-of-light fractions)."""
from __future__ import annotations

from kernelevo.core.evaluation_record import EvalResult, Status
from fitness.common.formatting import seconds as format_seconds
from fitness.measure.baselines import BASELINES, LABELS, best_text, speedup_text, verdict


def brief(result: EvalResult) -> str:
    """The verdict in one line, as a run tells its progress: ok and the time (interpreter wall-clock on the CPU),
    else the status and the reason's first line (at most 160 characters)."""
    if result.ok:
        wall = " (interpreter wall-clock)" if result.timer == "interpreter" else ""
        return f"ok, {format_seconds(result.time_s)}{wall}" if result.time_s is not None else "ok"
    first = result.reason.strip().splitlines()[0] if result.reason.strip() else ""
    first = first if len(first) <= 160 else first[:157] + "..."
    return f"{result.status}: {first}" if first else result.status


def summary(result: EvalResult) -> str:
    """The verdict whole, for the terminal and a notebook."""
    lines = [f"status: {result.status}" + (f"  ({result.label})" if result.label else ""),
             f"problem: {result.problem} {result.sizes or ''}".rstrip(),
             f"policy: {result.policy.get('name', '?')}  device: {result.device}  timer: {result.timer}"]
    if result.reason:
        lines.append("reason: " + result.reason.replace("\n", "\n        "))
    if result.max_abs_err is not None:
        lines.append(f"correctness: {result.trials_passed}/{result.trials} trials, max abs err "
                     f"{result.max_abs_err:.3g}, rel L2 {result.rel_l2:.3g}")
    elif result.status == Status.INCORRECT:  # outputs of another shape, dtype or count: no error to measure (reason)
        lines.append(f"correctness: {result.trials_passed}/{result.trials} trials passed; no error measured: the "
                     f"output could not be compared (see reason)")
    if result.time_s is not None and result.timer == "interpreter":  # wall-clock of the CPU interpreter: no baselines
        lines.append(f"time (interpreter wall-clock): {format_seconds(result.time_s)}")
    elif result.time_s is not None:
        lines.append(f"time: {format_seconds(result.time_s)}  eager: {format_seconds(result.eager_s)}  "
                     f"torch.compile: {format_seconds(result.compile_s)}  "
                     f"max-autotune: {format_seconds(result.max_autotune_s)}")
    if result.timer != "interpreter" and result.time_s is not None:
        record = result.to_dict()
        lines.append("speedup: " + ", ".join(
            f"{speedup_text(getattr(result, f'speedup_vs_{name}'), result.baseline_status.get(name))} vs "
            f"{LABELS[name]}" for name in BASELINES) + f"; {best_text(record)} vs the best")
        said = verdict(record)
        lines += [f"verdict: {said}"] if said else []
    if result.floor_fraction is not None:
        lines.append(f"data floor: {format_seconds(result.floor_s)}  fraction of the data floor: "
                     f"{result.floor_fraction:.1%}")
    if result.sol_fraction is not None:
        lines.append(f"reference algorithm's roofline: {format_seconds(result.sol_s)}  fraction of the reference "
                     f"algorithm's roofline: {result.sol_fraction:.1%} (over 100 %: fewer FLOPs than the reference)")
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append(f"evaluation wall time: {result.eval_wall_s:.2f} s")
    return "\n".join(lines)
