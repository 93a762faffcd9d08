"""A hardware profile's GEMM tiles (``HardwareProfile.gemm_tiles``) put on a genome's launch parameters.

A tile is a profile's fact: six values in ``TILE_PARAMS``' order, tiles known to run well on its device. A genome's
GEMM template kernel names its tile parameters with its kernel's prefix (``K0_BLOCK_M`` ... ``K0_NUM_STAGES``, as
``kernelevo/seeds/inductor/convert.py`` writes them; the prefixes of ``hardware_profiles.limits``), so the tuner, which
tries the profile's tiles after a genome's own configuration, reads them through ``tile_starts`` here, whichever seed
source made the kernel."""
from __future__ import annotations

TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_WARPS", "NUM_STAGES")  # a tile's values, in order


def tile_starts(space: dict, params: dict, tiles) -> list[dict]:
    """Launch parameters that put every GEMM template kernel of a genome (its ``<prefix>BLOCK_M`` ...
    ``<prefix>NUM_STAGES`` constants) on each of `tiles` (a hardware profile's ``gemm_tiles``), the others as in
    `params`; a tile some kernel's TUNABLE cannot take (a BLOCK_K that does not divide K, say) is left out, as are
    repeats. [] for a genome without template kernels."""
    prefixes = [name[: -len("BLOCK_M")] for name in space if name.endswith("BLOCK_M")
                and all(f"{name[: -len('BLOCK_M')]}{p}" in space for p in TILE_PARAMS)]
    starts = []
    for tile in tiles if prefixes else ():
        start = dict(params)
        for prefix in prefixes:
            start.update({f"{prefix}{p}": value for p, value in zip(TILE_PARAMS, tile)})
        if all(start[name] in space[name] for name in space) and start not in starts and start != params:
            starts.append(start)
    return starts
