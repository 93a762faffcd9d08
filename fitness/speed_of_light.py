"""Speed of light: the least time a problem can take on a device, from the bytes it must move and the FLOPs it must do.

Bytes are every input, parameter and output read or written once; FLOPs are counted by torch's FlopCounterMode on
the reference (matmuls, convolutions, attention; elementwise work counts as zero, which only lowers the bound).
Both come from running the reference on the meta device, so no memory is allocated and no GPU is needed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from fitness.correctness import as_tensor_list
from fitness.problem_spec import LoadedProblem, call_get_init_inputs, call_get_inputs
from hardware_profiles import HardwareProfile

PEAK_KEY = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
            torch.float8_e4m3fn: "fp8", torch.float8_e5m2: "fp8"}


@dataclass(frozen=True)
class ProblemCost:
    flops: float
    bytes: int
    dtype: str  # peak-table key of the widest floating input: fp32, fp16, bf16, fp8

    def to_dict(self) -> dict:
        return asdict(self)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@dataclass(frozen=True)
class MetaRun:
    """One reference forward on the meta device: its tensors' shapes without their memory, and its FLOPs."""
    inputs: list
    outputs: list
    parameters: list
    flops: float


def meta_build(problem: LoadedProblem) -> tuple:
    """(model, inputs) of the reference on the meta device: shapes without memory, nothing run."""
    with torch.device("meta"):
        torch.manual_seed(0)
        model = problem.Model(*call_get_init_inputs(problem))
        inputs = call_get_inputs(problem)
    return model, [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]


def meta_run(problem: LoadedProblem) -> MetaRun:
    """Run the reference once on the meta device (no memory allocated, no GPU needed), counting its FLOPs."""
    from torch.utils.flop_counter import FlopCounterMode

    model, inputs = meta_build(problem)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        outputs = as_tensor_list(model(*inputs))
    return MetaRun(inputs, outputs, list(model.state_dict().values()), float(counter.get_total_flops()))


def measure_cost(problem: LoadedProblem) -> ProblemCost:
    """FLOPs and minimum bytes of one reference forward, measured on the meta device."""
    return cost_of(meta_run(problem))


def cost_of(run: MetaRun) -> ProblemCost:
    """The bytes a forward must move (inputs, outputs, parameters, each once) and its FLOPs."""
    moved = _nbytes(run.inputs) + _nbytes(run.outputs) + _nbytes(run.parameters)
    floats = [x for x in run.inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    dtype = max(floats, key=lambda t: t.element_size()).dtype if floats else torch.float32
    return ProblemCost(flops=run.flops, bytes=int(moved), dtype=PEAK_KEY.get(dtype, "fp32"))


def peak_key(cost: ProblemCost, tf32: bool) -> str:
    """The peak-table key the problem's work runs at: its dtype, or tf32 for fp32 matmuls where TF32 is allowed."""
    return "tf32" if (cost.dtype == "fp32" and tf32) else cost.dtype


def speed_of_light_s(cost: ProblemCost, profile: HardwareProfile, tf32: bool) -> float | None:
    """max(bytes / bandwidth, flops / peak); None when the profile's figures are unknown."""
    bandwidth = profile.memory_bandwidth_bytes_per_s
    if not profile.peaks_known or not bandwidth:
        return None
    memory_s = cost.bytes / float(bandwidth)
    peak = profile.peak(peak_key(cost, tf32))
    compute_s = cost.flops / peak if (peak and cost.flops) else 0.0
    return max(memory_s, compute_s)
