"""Launch limits, in one place: the hard bounds on launch and tile values the operators keep to, and the launch
configurations that cannot run on a hardware profile (found by the tuner before anything is compiled)."""
from __future__ import annotations

import re

from hardware_profiles import HardwareProfile

# Hard bounds on integer launch/tile values, by name. First matching pattern wins (searched in the upper-cased
# name, so a `num_warps=` keyword matches NUM_WARPS); names matching none get DEFAULT_BOUNDS.
BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("NUM_WARPS", 1, 32),  # further capped by the profile's max_threads_per_block / 32
    ("NUM_STAGES", 1, 8),  # software-pipelining depth
    ("BLOCK_K", 16, 65536),  # the reduction tile of tl.dot must be >= 16
    ("BLOCK|TILE", 16, 65536),  # other tile sizes
)
DEFAULT_BOUNDS = (1, 65536)
WARP_SIZE = 32


def value_bounds(name: str, profile: HardwareProfile | None = None) -> tuple[int, int]:
    """The inclusive (low, high) range a value of the named knob may take."""
    key = name.upper()
    low, high = next(((lo, hi) for pattern, lo, hi in BOUNDS if re.search(pattern, key)), DEFAULT_BOUNDS)
    if profile is not None and "NUM_WARPS" in key:
        high = min(high, profile.max_threads_per_block // WARP_SIZE)
    return low, high


def in_bounds(name: str, value: int, profile: HardwareProfile | None = None) -> bool:
    low, high = value_bounds(name, profile)
    return low <= value <= high


WORST_CASE_ELEMENT_BYTES = 4  # fp32 tiles: the largest element a bundled kernel stages in shared memory


def _value(params: dict, *names):
    for name in names:
        if name in params:
            return params[name]
    return None


def limit_violation(params: dict, profile: HardwareProfile | None) -> str:
    """Why these launch parameters break the profile's limits, or "" when they may be compiled."""
    if profile is None:
        return ""
    warps = _value(params, "NUM_WARPS", "num_warps")
    if warps is not None and warps * WARP_SIZE > profile.max_threads_per_block:
        return (f"NUM_WARPS={warps} needs {warps * WARP_SIZE} threads per block; {profile.display_name} allows "
                f"{profile.max_threads_per_block}")
    block_m, block_n, block_k = (_value(params, n) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    if None not in (block_m, block_n, block_k):
        stages = _value(params, "NUM_STAGES", "num_stages") or 1
        smem = (block_m * block_k + block_k * block_n) * WORST_CASE_ELEMENT_BYTES * stages
        if smem > profile.shared_memory_per_block_bytes:
            return (f"tiles {block_m}x{block_n}x{block_k} with {stages} stages need ~{smem // 1024} KiB of shared "
                    f"memory; {profile.display_name} has {profile.shared_memory_per_block_bytes // 1024} KiB per block")
    return ""
