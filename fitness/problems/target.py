"""The target of a search: the GPU and the sizes its kernels are written for, with the cost model at those sizes.

Candidates are judged where the search runs: on a GPU at the problem's sizes, or on Triton's CPU interpreter at
small test sizes. The kernels are meant for the target all the same: the GPU searched on (its hardware profile), or
on the CPU the GPU named by ``hardware.profile`` (none with ``auto``); at the problem's full sizes (on the CPU the
problem file's own sizes: overrides only shrink the interpreter's work). The cost model at those sizes (bytes
moved, FLOPs, arithmetic intensity) against the target's bandwidth and peak gives the speed-of-light time and
whether the problem is memory or compute bound there (``Target``), which the run's start line and the LLM agents'
prompts state, labelled apart from what was measured where.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch

from fitness.problems.dependence import Dependence, dependence_of
from fitness.problems.problem import LoadedProblem, ProblemSpec, load_problem
from kernelevo.core.evaluation_record import ProblemCost
from fitness.problems.speed_of_light import cost_of, meta_run, peak_key
from hardware_profiles import HardwareProfile


@dataclass(frozen=True)
class Target:
    profile: HardwareProfile | None  # the target GPU; None when none is named (the CPU with hardware.profile=auto)
    sizes: dict  # the problem's size constants at the target
    inputs: tuple = ()  # "x: float32[4096, 8192]", one per forward input
    outputs: tuple = ()
    cost: ProblemCost | None = None  # bytes and FLOPs of one forward at the target sizes
    tf32: bool = False  # the precision policy lets fp32 matmuls run as TF32
    device: str = "cpu"  # where candidates are judged: cuda:N, or cpu (Triton's interpreter)
    evaluated_sizes: dict = field(default_factory=dict)  # the sizes candidates are judged at
    dependence: Dependence | None = None  # which inputs and parameters the output depends on (the data floor)

    @property
    def interpreter(self) -> bool:
        return not self.device.startswith("cuda")

    @property
    def peak_key(self) -> str:
        return peak_key(self.cost, self.tf32) if self.cost else "fp32"

    @property
    def bandwidth(self) -> float | None:
        return self.profile.memory_bandwidth_bytes_per_s if self.profile else None

    @property
    def peak(self) -> float | None:
        return self.profile.peak(self.peak_key) if self.profile and self.profile.peaks_known else None

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte moved at the target sizes."""
        return self.cost.flops / self.cost.bytes if self.cost and self.cost.bytes else None

    @property
    def ridge(self) -> float | None:
        """The intensity (FLOP/byte) above which the target's peak, not its bandwidth, bounds the time."""
        return self.peak / self.bandwidth if self.peak and self.bandwidth else None

    @property
    def memory_s(self) -> float | None:
        return self.cost.bytes / self.bandwidth if self.cost and self.bandwidth else None

    @property
    def compute_s(self) -> float | None:
        return self.cost.flops / self.peak if self.cost and self.peak else None

    @property
    def floor_s(self) -> float | None:
        """The data floor at the target: what the output depends on, read once, and the output written, over
        bandwidth (``fitness.problems.speed_of_light.data_floor_s``)."""
        if not self.cost or self.cost.data_bytes is None or not self.bandwidth:
            return None
        return self.cost.data_bytes / self.bandwidth

    @property
    def sol_s(self) -> float | None:
        """The reference algorithm's roofline at the target: max(bytes / bandwidth, FLOPs / peak). Not a bound on
        a kernel: an exact rewrite may need fewer FLOPs."""
        return max(self.memory_s or 0.0, self.compute_s or 0.0) or None

    @property
    def bound(self) -> str:
        """"memory" or "compute" on the target, "" when its figures are unknown."""
        if self.intensity is None or self.ridge is None:
            return ""
        return "compute" if self.intensity > self.ridge else "memory"

    def describe(self) -> str:
        """One line for the run's start: what the kernels are written for."""
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        if self.profile is None:
            return (f"no target GPU (hardware.profile=auto on the CPU; name the GPU the kernels are for, e.g. "
                    f"hardware.profile=h100_sxm) at full sizes {sizes}")
        return f"target {self.profile.display_name} (hardware.profile={self.profile.name}) at full sizes {sizes}"


def _shapes(values, names=()) -> tuple:
    described = []
    for index, value in enumerate(values):
        name = f"{names[index]}: " if index < len(names) else ""
        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            described.append(f"{name}{dtype}[{', '.join(str(d) for d in value.shape)}]")
        else:
            described.append(f"{name}{type(value).__name__} {value!r}"[:80])
    return tuple(described)


def target_sizes_spec(spec: ProblemSpec, device: str) -> ProblemSpec:
    """The problem at its target sizes: as evaluated on a GPU; on the CPU, the problem file's own sizes."""
    if device.startswith("cuda"):
        return spec
    return ProblemSpec(spec.name, spec.path, {}, spec.seed_path, "full")


def target_for(spec: ProblemSpec, device: str, profile: HardwareProfile | None, tf32: bool,
               judged: LoadedProblem | None = None, dependence: Dependence | None = None) -> Target:
    """The target of a search over `spec` judged on `device`, for the hardware `profile` it was given (`judged`:
    `spec` loaded already; `dependence`: ``fitness.problems.dependence.dependence_of(spec)`` made already)."""
    gpu = profile if profile is not None and profile.kind == "gpu" else None
    judged = judged or load_problem(spec)
    full = target_sizes_spec(spec, device)
    loaded = judged if full == spec else load_problem(full)
    evaluated = judged.sizes
    try:
        run = meta_run(loaded)
    except Exception:  # a reference the meta device cannot run: sizes only, no cost model
        return Target(gpu, loaded.sizes, tf32=tf32, device=device, evaluated_sizes=evaluated)
    names = [p for p in inspect.signature(loaded.Model.forward).parameters if p != "self"]
    dependence = dependence or dependence_of(spec, tuple(names))
    return Target(gpu, loaded.sizes, _shapes(run.inputs, names), _shapes(run.outputs), cost_of(run, dependence), tf32,
                  device, evaluated, dependence)
