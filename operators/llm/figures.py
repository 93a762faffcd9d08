"""The figures an agent is shown, each labelled with where it came from.

* the target (``fitness.problems.target.Target``): the GPU the kernels are written for and the problem at its full
sizes,
  with the cost model there (bytes, FLOPs, intensity, the data floor and the reference algorithm's roofline, memory
  or compute bound from the GPU's bandwidth and peak), computed, not measured;
* measured times (an ``EvalResult``): CUDA events on a GPU, or the CPU interpreter's wall-clock at test sizes,
  which is no GPU time and says so;
* profiler metrics (``fitness.workers.ncu``'s record): Nsight Compute's, for one forward call on the GPU.

Every figure has two significant digits and no exponent, so re-measuring the same kernel rarely changes a prompt.
"""
from __future__ import annotations

from fitness.common.formatting import short_seconds as fmt_time, two_digits
from fitness.judge.guards import DATA_MOVEMENT_OPS
from fitness.problems.target import Target, target_for

TERA = 1e12


def fmt_bytes(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{two_digits(count / scale)} {unit}"
    return f"{count:.0f} B"


def fmt_sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def ratio(base: float | None, new: float | None) -> str:
    """How `new` compares with `base` as a speed: "1.3x faster", "2.0x slower", "as fast"."""
    if not base or not new:
        return ""
    if abs(base / new - 1) < 0.005:
        return "as fast"
    factor = base / new if new < base else new / base
    return f"{factor:.2f}x {'faster' if new < base else 'slower'}" if factor < 10 else \
        f"{two_digits(factor)}x {'faster' if new < base else 'slower'}"


# the target -------------------------------------------------------------------------------------------------
def hardware_text(target: Target) -> str:
    """The target GPU's facts and where candidates are judged."""
    profile = target.profile
    if profile is None:
        facts = ("No target GPU was named for this search: write for a current NVIDIA data-centre GPU (at most "
                 "1024 threads per block).")
    else:
        peaks = ", ".join(f"{k} {two_digits(v / TERA)}" for k, v in profile.peak_flops_per_s.items() if v)
        bandwidth = profile.memory_bandwidth_bytes_per_s
        facts = (f"{profile.display_name} (hardware profile {profile.name}): {profile.sm_count} SMs; per block at "
                 f"most {profile.max_threads_per_block} threads, {profile.shared_memory_per_block_bytes // 1024} KiB "
                 f"shared memory, {profile.registers_per_block // 1024}K registers; {residency_text(profile)}"
                 f"{profile.l2_cache_bytes // (1 << 20)} MiB L2"
                 + (f"; {two_digits(bandwidth / TERA)} TB/s memory bandwidth" if bandwidth else "")
                 + (f"; dense peak {peaks} TFLOP/s" if peaks else "") + ".")
    return f"## Target GPU\n{facts}\n{judged_text(target)}"


def residency_text(profile) -> str:
    """What one SM holds at once (the blocks resident together share its registers and shared memory), or ""."""
    limits = [f"{profile.max_threads_per_sm} threads ({profile.max_threads_per_sm // 32} warps)"
              if profile.max_threads_per_sm else "",
              f"{profile.max_blocks_per_sm} blocks" if profile.max_blocks_per_sm else ""]
    limits = [limit for limit in limits if limit]
    return (f"per SM at most {' and '.join(limits)} resident at once, sharing its "
            f"{profile.registers_per_sm // 1024}K registers and {profile.shared_memory_per_sm_bytes // 1024} KiB "
            f"shared memory; ") if limits else ""


def judged_text(target: Target) -> str:
    if target.interpreter:
        test, full = target.evaluated_sizes, target.sizes
        smaller = {k: v for k, v in test.items() if full.get(k) != v}
        collapsed = (" At these sizes a kernel takes only the paths they need: paths that only the full sizes take "
                     "(more blocks or programs along a dimension, more loop iterations, a reduction split over "
                     "programs) do not run here, so they are not checked." if smaller else "")
        return (f"Candidates are judged on the CPU through Triton's interpreter (TRITON_INTERPRET=1: kernels run as "
                f"NumPy, one program at a time) at small test sizes ({fmt_sizes(test)}): a kernel must be correct "
                f"there and fast on the target GPU at full size.{collapsed} The interpreter's wall-clock times say "
                f"nothing of a GPU's speed: no speed-ups or ratios are given from them; judge speed by the cost "
                f"model.")
    return f"Candidates are judged on this GPU ({target.device}) at the sizes below."


def judged_inputs(spec, dependence=None) -> tuple:
    """The forward inputs at the sizes candidates are judged at (`spec`'s: "x: float32[2, 64]"), described as the
    target's are; () where the meta device cannot run the reference. `dependence`: the evaluator's
    (``fitness.problems.dependence``, decided at the test sizes whatever the spec's), so it is not decided again."""
    return target_for(spec, "cuda", None, False, dependence=dependence).inputs


def _depends_text(target: Target) -> str:
    """What of it the output depends on (the data floor's bytes), naming what the reference ignores."""
    cost, dep = target.cost, target.dependence
    if cost is None or cost.data_bytes is None or cost.data_bytes == cost.bytes:
        return ", all of which the output depends on" if cost is not None and cost.data_bytes is not None else ""
    ignored = ", ".join((dep.ignored_inputs if dep else []) + list(dep.ignored_parameters if dep else []))
    return (f", of which the output depends on {fmt_bytes(cost.data_bytes)}"
            + (f" (it ignores {ignored})" if ignored else ""))


def beyond_roofline_text(target: Target) -> str:
    """What bounds the reference's algorithm on the target and which kinds of change could beat its roofline, in
    general terms (no problem's solution: the prompts teach, they do not tell)."""
    gap = (" The data floor is below the bytes the reference moves: a kernel that reads only what the output depends "
           "on moves less." if target.floor_s is not None and target.memory_s and target.floor_s < target.memory_s
           else "")
    if not target.cost or not target.cost.flops:
        return ("Only bytes are counted here, so the roofline is their time: a kernel gains by moving fewer bytes "
                "(each input read once, intermediates kept on chip instead of written and read back) and by keeping "
                "the memory system busy, down to the data floor." + gap)
    if target.bound == "compute":
        return ("It is a bound on the reference's algorithm, not on the problem: a kernel that computes the same "
                "outputs with fewer FLOPs -- an exact rewrite of the reference's algebra, equal up to floating-point "
                "reassociation within the policy's tolerance -- may beat it, down to the data floor; else the gain "
                "is in running the FLOPs nearer the peak (tensor cores, tiling, data reuse)." + gap)
    return ("Its bytes take longer than its FLOPs: a kernel gains by moving fewer bytes (each input read once, "
            "intermediates kept on chip instead of written and read back), down to the data floor; doing fewer "
            "FLOPs (an exact rewrite of the reference's algebra, equal up to floating-point reassociation within "
            "the policy's tolerance) gains here only where it also moves fewer bytes." + gap)


def cost_model_text(target: Target, hardware: bool = True, judged: tuple = ()) -> str:
    """The problem at its full sizes and its cost there, every input's full shape (and, on the interpreter, its
    shape at the test sizes, `judged`); with `hardware`, the speed of light and the bound on the target GPU."""
    lines = [f"## Problem at full size\nSizes: {fmt_sizes(target.sizes) or 'as in the reference'}."]
    if target.inputs:
        lines.append(f"Inputs at full size {', '.join(target.inputs)}; outputs {', '.join(target.outputs)}.")
    if target.interpreter and judged and judged != target.inputs:
        lines.append(f"Inputs at the test sizes the interpreter judges: {', '.join(judged)}. Read every size from "
                     f"the inputs' shapes: the kernel must run at both.")
    cost = target.cost
    if cost is None:
        return "\n".join(lines)
    flops = (f"{two_digits(cost.flops / 1e9)} GFLOP" if cost.flops else
             "0 FLOP counted (only matmul, convolution and attention FLOPs are counted; elementwise work is not)")
    lines.append(f"Cost model at these sizes: the reference moves {fmt_bytes(cost.bytes)} (inputs, outputs and "
                 f"parameters once each){_depends_text(target)}; the reference algorithm does {flops}, arithmetic "
                 f"intensity {two_digits(target.intensity or 0)} FLOP/byte.")
    if hardware and target.floor_s is not None:
        lines.append(f"On the target GPU the data floor is {fmt_time(target.floor_s)}: what the output depends on, "
                     f"read once, and the output written, over bandwidth. No kernel can be faster; a time below it is "
                     f"rejected as implausible.")
    if hardware and target.sol_s is not None:
        compute = f", its FLOPs / {target.peak_key} peak {fmt_time(target.compute_s)}" if target.compute_s else ""
        lines.append(f"The reference algorithm's roofline is {fmt_time(target.sol_s)} (bytes / bandwidth "
                     f"{fmt_time(target.memory_s)}{compute}): {target.bound} bound as the reference computes it (its "
                     f"ridge point is {two_digits(target.ridge)} FLOP/byte at the {target.peak_key} peak). "
                     f"{beyond_roofline_text(target)} Estimates are not exact: every element the output depends on "
                     f"must be read (the judge changes single input elements and the output must follow).")
    return "\n".join(lines)


def allowed_torch_text() -> str:
    """The torch calls `forward` may make besides launching its kernels (``fitness.judge.guards.DATA_MOVEMENT_OPS``, as
    torch functions or tensor methods)."""
    names = sorted(op for op in DATA_MOVEMENT_OPS if not op.startswith(("_", "sym_")))
    return ", ".join(f"`{name}`" for name in names)


def tuning_text(target: Target, trials: int | None) -> str:
    """What the tuner does with the launch parameters a module declares, on this device."""
    if target.interpreter:
        return ("on this machine (Triton's CPU interpreter) no kernel an LLM writes is tuned: it is judged once, "
                "with its constants as written (1 trial), since the interpreter's times say nothing of a GPU's; "
                "write the values you mean for the target GPU")
    count = f"{trials} trials" if trials else "its trials"
    return (f"an Optuna study then tunes the constants declared in `TUNABLE` on this GPU ({count} per kernel, the "
            f"first with your values), each timed at full size")


# measured figures ---------------------------------------------------------------------------------------------
def _judged_sizes(result, target: Target | None) -> dict:
    """The sizes a result was judged at: all of them when it was judged as the target's evaluations are, else the
    overrides it records."""
    return target.evaluated_sizes if target is not None and result.device == target.device else result.sizes


def measured_where(result, target: Target | None = None) -> str:
    """Where a result's time was measured, as a label."""
    sizes = _judged_sizes(result, target)
    if result.timer == "interpreter":
        return f"CPU interpreter wall-clock at test sizes ({fmt_sizes(sizes)}), not GPU time"
    full = not result.sizes or (target is not None and sizes == target.sizes)
    return f"CUDA events on {result.hardware_profile or result.device} " + \
        ("at full size" if full else f"at sizes ({fmt_sizes(sizes)})")


def ran_where(result, target: Target | None = None) -> str:
    """Where an evaluation ran, for the agent repairing its failure."""
    sizes = fmt_sizes(_judged_sizes(result, target))
    if result.timer == "interpreter" or result.device == "cpu":
        return ("on the CPU through Triton's interpreter (TRITON_INTERPRET=1: kernels run as NumPy, one program at "
                f"a time; GPU-only features such as inline assembly do not run there), at test sizes ({sizes})")
    return f"on {result.hardware_profile or 'the GPU'} ({result.device})" + (f" at sizes ({sizes})" if sizes else
                                                                              " at full size")


def measured_text(result, target: Target | None = None) -> str:
    """A correct kernel's measured figures, labelled with where they were measured; on the interpreter only that it
    was correct there (its wall-clock says nothing of a GPU's: no time is quoted as a speed)."""
    if result is None or not result.ok:
        return ""
    if result.timer == "interpreter":
        return (f"correct on the CPU interpreter at test sizes ({fmt_sizes(_judged_sizes(result, target))}); no GPU "
                f"time was measured, and the interpreter's wall-clock is no speed")
    parts = [f"{fmt_time(result.time_s)} ({measured_where(result, target)})"]
    if result.eager_s:
        parts.append(f"PyTorch eager {fmt_time(result.eager_s)} ({ratio(result.eager_s, result.time_s)}), "
                     f"torch.compile {fmt_time(result.compile_s)} ({ratio(result.compile_s, result.time_s)})"
                     + (f", torch.compile max-autotune {fmt_time(result.max_autotune_s)} "
                        f"({ratio(result.max_autotune_s, result.time_s)})" if result.max_autotune_s else ""))
    if getattr(result, "floor_fraction", None) is not None:
        parts.append(f"{result.floor_fraction:.0%} of the data floor ({fmt_time(result.floor_s)})")
    if result.sol_fraction is not None:
        parts.append(f"{result.sol_fraction:.0%} of the reference algorithm's roofline ({fmt_time(result.sol_s)}; "
                     f"over 100 % where fewer FLOPs than the reference's)")
    return "; ".join(parts)


# profiler metrics ---------------------------------------------------------------------------------------------
def _kernel_metrics(kernel: dict) -> str:
    shape = ", ".join(f"{k} {kernel[f'{k}_size']:.0f}" for k in ("grid", "block") if f"{k}_size" in kernel)
    name = kernel["name"] if len(kernel["name"]) <= 80 else kernel["name"][:77] + "..."
    head = f"{name} ({kernel.get('launches', 1)} launch{'es' if kernel.get('launches', 1) > 1 else ''}"
    head += f", {shape})" if shape else ")"
    facts = []
    if "time_s" in kernel:
        facts.append(fmt_time(kernel["time_s"]))
    throughput = [f"{label} {kernel[key]:.0f}%" for label, key in (("DRAM", "dram_pct"), ("SM", "sm_pct"))
                  if key in kernel]
    if throughput:
        facts.append(" and ".join(throughput) + " of peak throughput")
    if "occupancy_pct" in kernel:
        facts.append(f"achieved occupancy {kernel['occupancy_pct']:.0f}%")
    if "registers_per_thread" in kernel:
        facts.append(f"{kernel['registers_per_thread']:.0f} registers/thread")
    if "smem_bytes" in kernel:
        facts.append(f"{fmt_bytes(kernel['smem_bytes'])} shared memory/block")
    if kernel.get("top_stalls"):
        facts.append("top stalls (cycles per issued instruction): "
                     + ", ".join(f"{reason} {two_digits(value)}" for reason, value in kernel["top_stalls"]))
    return f"- {head}: " + "; ".join(facts)


HOST_BOUND = 0.5  # a forward whose kernels' GPU time (under ncu) is below this share of its measured time


def _total_line(total: dict, measured_s: float | None) -> str:
    """Every launch of the forward together, and where their GPU time is under HOST_BOUND of the forward's measured
    time, that the host's launching is the rest, which no tuning of the kernels' launch parameters changes (fewer or
    cheaper launches do: docs/measurements.md). ncu's clocks are locked to base, so its GPU time is if anything too
    long, and the host's share too small."""
    launches, gpu_s = total["launches"], total["time_s"]
    line = f"- all {launches} launch{'es' if launches != 1 else ''} together: {fmt_time(gpu_s)} on the GPU"
    if not measured_s or gpu_s >= HOST_BOUND * measured_s:
        return line
    per_launch_us = (measured_s - gpu_s) / launches * 1e6
    return (f"{line}, {gpu_s / measured_s:.0%} of the {fmt_time(measured_s)} the forward measured: the rest is the "
            f"host launching them, about {two_digits(per_launch_us)} us a launch. Fewer launches (kernels fused, one "
            f"persistent kernel over a loop) gain more here than faster kernels, and a launch through the compiled "
            f"kernel (the seed's LaunchSites, where it has one) costs the host under half of what Triton's "
            f"kernel[grid](...) does")


def profiler_text(profile: dict | None) -> str:
    """Nsight Compute's metrics of one forward call ("" when there are none: profiling off or impossible), then all
    its launches together (``total``; beside ``measured_s``, the kernel's measured time, where the caller gives it)."""
    if not profile or not profile.get("kernels"):
        return ""
    lines = [_kernel_metrics(kernel) for kernel in profile["kernels"]]
    if profile.get("total"):
        lines.append(_total_line(profile["total"], profile.get("measured_s")))
    return "\n".join(lines)
