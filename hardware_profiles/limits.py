"""Launch configurations that cannot run on a hardware profile, found before anything is compiled."""
from __future__ import annotations

from hardware_profiles import HardwareProfile

WARP_SIZE = 32
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
