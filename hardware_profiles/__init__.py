"""Hardware profiles: the facts about a device that the evaluator, tuner and LLM prompts reason with.

Each ``*.yaml`` beside this file describes one device; the figures and their sources live there, not in code.
``load_profile(name)`` reads one, ``detect_profile()`` picks the one matching the live GPU (or the CPU interpreter). The
facts layer, above the data model alone: it imports nothing of the project but ``core`` (the order:
docs/architecture.md, checked by tests/project/test_layers.py)."""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from kernelevo.core.errors import KernelevoError

PROFILE_DIR = Path(__file__).resolve().parent
DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8")
# what torch's device properties do not report: 255 registers per thread on every NVIDIA GPU from compute
# capability 3.5 on (CUDA C++ Programming Guide, technical specifications per compute capability)
CUDA_MAX_REGISTERS_PER_THREAD = 255


@dataclass(frozen=True)
class HardwareProfile:
    name: str
    display_name: str
    kind: str  # "gpu" or "interpreter"
    sm_count: int
    max_threads_per_block: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int  # 32-bit registers one thread may have: more live fp32 values spill (limits.py)
    shared_memory_per_sm_bytes: int
    shared_memory_per_block_bytes: int
    l2_cache_bytes: int
    memory_bandwidth_bytes_per_s: float | None
    peak_flops_per_s: dict = field(default_factory=dict)
    compute_capability: str | None = None
    match: tuple = ()
    peaks_known: bool = True
    # GEMM tiles known to run well here, each (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the first
    # configurations the tuner tries on a GEMM template kernel after the kernel's own (``hardware_profiles.tiles``)
    gemm_tiles: tuple = ()
    # residency: the most threads and blocks one SM holds at once (None: unknown); the blocks resident together share
    # its registers and shared memory
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    # measured: does a worker starting up (its CUDA context, the judge's warm-up) slow a kernel timed meanwhile?
    # None: not measured here, so start-ups hold the GPU's lock (fitness.start_up_under_lock)
    start_up_disturbs_timing: bool | None = None

    def peak(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for a dtype key (fp32, tf32, bf16, fp16, fp8), None when unknown."""
        value = self.peak_flops_per_s.get(dtype)
        return float(value) if value is not None else None

    def to_dict(self) -> dict:
        return asdict(self)


def _number(value) -> float | None:
    """YAML 1.1 reads `3.35e12` (no sign in the exponent) as a string; accept it as the number it means."""
    return None if value is None else float(value)


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def load_profile(name: str) -> HardwareProfile:
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise KernelevoError(
            f"unknown hardware profile {name!r}; choose one of {available_profiles()} "
            f"(files in {PROFILE_DIR}) or 'auto' to detect the live device"
        )
    data = yaml.safe_load(path.read_text())
    data["match"] = tuple(data.get("match") or ())
    data["gemm_tiles"] = tuple(tuple(int(v) for v in tile) for tile in data.get("gemm_tiles") or ())
    peaks = data.get("peak_flops_per_s") or {}
    data["peak_flops_per_s"] = {k: _number(peaks.get(k)) for k in DTYPES}
    data["memory_bandwidth_bytes_per_s"] = _number(data.get("memory_bandwidth_bytes_per_s"))
    return HardwareProfile(**data)


def profile_for_device_name(device_name: str) -> HardwareProfile | None:
    """The bundled profile whose `match` substrings occur in the device name, if any."""
    for name in available_profiles():
        profile = load_profile(name)
        if any(m.lower() in device_name.lower() for m in profile.match):
            return profile
    return None


def profile_from_properties(props) -> HardwareProfile:
    """A profile for an unknown GPU, built from torch.cuda device properties; its peak rates are unknown."""
    smem_block = getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)
    return HardwareProfile(
        name="unknown_gpu",
        display_name=props.name,
        kind="gpu",
        sm_count=props.multi_processor_count,
        max_threads_per_block=getattr(props, "max_threads_per_block", 1024),
        registers_per_sm=getattr(props, "regs_per_multiprocessor", 65536),
        registers_per_block=65536,
        max_registers_per_thread=CUDA_MAX_REGISTERS_PER_THREAD,
        shared_memory_per_sm_bytes=getattr(props, "shared_memory_per_multiprocessor", smem_block),
        shared_memory_per_block_bytes=smem_block,
        l2_cache_bytes=getattr(props, "L2_cache_size", 0),
        memory_bandwidth_bytes_per_s=None,
        peak_flops_per_s={k: None for k in DTYPES},
        compute_capability=f"{props.major}.{props.minor}",
        peaks_known=False,
        max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", None),
    )


def detect_profile() -> HardwareProfile:
    """The profile of the live device: a bundled GPU profile, a property-built one, or the CPU interpreter."""
    import torch

    if not torch.cuda.is_available():
        return load_profile("cpu_interpreter")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    profile = profile_for_device_name(props.name)
    if profile is None:
        warnings.warn(
            f"no hardware profile matches {props.name!r}: using its reported properties; peak FLOP/s and "
            f"bandwidth are unknown, so no speed-of-light figure or plausibility check. Add a YAML file to "
            f"{PROFILE_DIR} to fix this.",
            stacklevel=2,
        )
        profile = profile_from_properties(props)
    return profile


def resolve_profile(name: str) -> HardwareProfile:
    """`auto` detects the live device; any other name loads that bundled profile."""
    return detect_profile() if name == "auto" else load_profile(name)
