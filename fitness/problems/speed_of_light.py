"""Two speed-of-light figures of a problem on a device:

* the **data floor** (``data_floor_s``): the least time to read what the output depends on (each such input and
  parameter once; ``fitness.problems.dependence`` decides which, from the reference itself) and write the output, over
  the device's bandwidth. No kernel computing the output can be faster: the evaluator's plausibility check uses it.
* the **reference algorithm's roofline** (``speed_of_light_s``): max(every input, parameter and output moved once
  over bandwidth, the reference's FLOPs over peak). A reported figure only: an exact rewrite of the reference's
  algebra need not do the reference's FLOPs, so a kernel may beat it (over 100 %).

FLOPs are counted by torch's FlopCounterMode on the reference (matmuls, convolutions, attention; elementwise work
counts as zero). Bytes and FLOPs come from running the reference on the meta device, so no memory is allocated and
no GPU is needed.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kernelevo.core.evaluation_record import ProblemCost
from fitness.comparison.correctness import as_tensor_list
from fitness.problems.problem_spec import LoadedProblem, call_get_init_inputs, call_get_inputs
from hardware_profiles import HardwareProfile

PEAK_KEY = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8"}


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@dataclass(frozen=True)
class MetaRun:
    """One reference forward on the meta device: its tensors' shapes without their memory, and its FLOPs."""
    inputs: list
    outputs: list
    parameters: list
    flops: float
    state: dict | None = None  # the parameters by state_dict name

    def __post_init__(self):
        if self.state is None:
            object.__setattr__(self, "state", dict(enumerate(self.parameters)))


def meta_build(problem: LoadedProblem) -> tuple:
    """(model, inputs) of the reference on the meta device: shapes without memory, nothing run. A constructor that
    reads a tensor's value cannot run there (level3/29-30, the Swins: ``.item()`` of their drop-path rates); such a
    model is built on the CPU, with its memory, and then moved to the meta device."""
    with torch.device("meta"):
        torch.manual_seed(0)
        try:
            model = problem.Model(*call_get_init_inputs(problem))
        except Exception:  # noqa: BLE001 - built on the CPU below, where a real error shows as itself
            model = None
        inputs = call_get_inputs(problem)
    if model is None:
        torch.manual_seed(0)
        model = problem.Model(*call_get_init_inputs(problem)).to("meta")
    return model, [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]


def meta_run(problem: LoadedProblem) -> MetaRun:
    """Run the reference once on the meta device (no memory allocated, no GPU needed), counting its FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    model, inputs = meta_build(problem)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        outputs = as_tensor_list(model(*inputs))
    state = dict(model.state_dict())
    return MetaRun(inputs, outputs, list(state.values()), float(counter.get_total_flops()), state)


def measure_cost(problem: LoadedProblem, dependence=None) -> ProblemCost:
    """FLOPs and minimum bytes of one reference forward, measured on the meta device (`dependence`: ``cost_of``)."""
    return cost_of(meta_run(problem), dependence)


def cost_of(run: MetaRun, dependence=None) -> ProblemCost:
    """The bytes a forward moves (inputs, outputs, parameters, each once), its FLOPs, and with `dependence`
    (``fitness.problems.dependence.Dependence``) the bytes of the data floor: only the inputs and parameters it
    counts."""
    moved = _nbytes(run.inputs) + _nbytes(run.outputs) + _nbytes(run.parameters)
    floats = [x for x in run.inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    dtype = max(floats, key=lambda t: t.element_size()).dtype if floats else torch.float32
    data = None
    if dependence is not None:
        used = dependence.inputs if len(dependence.inputs) == len(run.inputs) else (True,) * len(run.inputs)
        kept = [x for x, u in zip(run.inputs, used) if u]
        kept += [t for name, t in run.state.items() if name not in dependence.ignored_parameters]
        data = _nbytes(kept) + _nbytes(run.outputs)
    return ProblemCost(flops=run.flops, bytes=int(moved), dtype=PEAK_KEY.get(dtype, "fp32"), data_bytes=data)


def peak_key(cost: ProblemCost, tf32: bool) -> str:
    """The peak-table key the problem's work runs at: its dtype, or tf32 for fp32 matmuls where TF32 is allowed."""
    return "tf32" if (cost.dtype == "fp32" and tf32) else cost.dtype


def data_floor_s(cost: ProblemCost, profile: HardwareProfile) -> float | None:
    """The data floor: the bytes the output depends on (read once) and the output's (written) over the profile's
    bandwidth; None when either is unknown."""
    bandwidth = profile.memory_bandwidth_bytes_per_s
    if cost.data_bytes is None or not bandwidth:
        return None
    return cost.data_bytes / float(bandwidth)


def speed_of_light_s(cost: ProblemCost, profile: HardwareProfile, tf32: bool) -> float | None:
    """The reference algorithm's roofline: max(bytes / bandwidth, flops / peak); None when the profile's figures
    are unknown. Reported, never a bound on a kernel (an exact rewrite may do fewer FLOPs)."""
    bandwidth = profile.memory_bandwidth_bytes_per_s
    if not profile.peaks_known or not bandwidth:
        return None
    memory_s = cost.bytes / float(bandwidth)
    peak = profile.peak(peak_key(cost, tf32))
    compute_s = cost.flops / peak if (peak and cost.flops) else 0.0
    return max(memory_s, compute_s)
