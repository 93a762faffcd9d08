"""Launch limits, in one place: the hard bounds on launch and tile values the operators keep to, and the launch
configurations that a hardware profile cannot run, or cannot run well (found by the tuner before anything is
compiled).

A launch parameter says which kernel it belongs to by a prefix: an Inductor seed's ``K0_XBLOCK`` and
``K0_NUM_WARPS`` are kernel K0's (``kernelevo/seeds/inductor/convert.py``), a one-kernel seed's ``BLOCK_SIZE`` and
``NUM_WARPS`` have none. A kernel is a prefix that some ``<prefix>NUM_WARPS`` or ``<prefix>NUM_STAGES`` knob has
(and the empty one); each of its block sizes (XBLOCK, YBLOCK, R0_BLOCK, BLOCK, BLOCK_SIZE, BLOCK_M, TILE_N, ...) is
a dimension of its tile. Triton spreads a tile over the program's num_warps x 32 threads, each holding its share in
registers, so a tile of more fp32 values per thread than a thread has registers cannot stay in registers: it spills
to local memory, runs slowly, and takes long to build (docs/measurements.md). The tile alone is a lower bound on a
thread's registers (the kernel needs more for addresses, masks and temporaries), so only configurations that must spill
are refused.
"""
from __future__ import annotations

import math
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
WARPS, STAGES = "NUM_WARPS", "NUM_STAGES"
# a tile dimension's knob, after the kernel's prefix: Inductor's XBLOCK / R0_BLOCK / RBLOCK, and BLOCK, BLOCK_SIZE,
# BLOCK_<dim>, BLOCK_SIZE_<dim>, TILE_<dim>; <dim> K is a GEMM's contraction (its operand tiles, not its output)
TILE_KNOB = re.compile(r"[XYZ]BLOCK|R\d*_?BLOCK|(?:BLOCK|TILE)(?:_SIZE)?(?:_(?P<dim>[A-Z0-9]+))?")


def kernel_knobs(params: dict) -> dict[str, dict[str, tuple[str, int]]]:
    """{kernel prefix: {knob without the prefix (upper case): (the parameter's name, its value)}} for the launch
    knobs of `params` (warps, stages and tile sizes); each name goes to the longest kernel prefix it starts with."""
    upper = {name.upper(): name for name in params}
    prefixes = {""} | {key[: -len(knob)] for key in upper for knob in (WARPS, STAGES) if key.endswith(knob)}
    kernels: dict[str, dict] = {}
    for key, name in upper.items():
        for prefix in sorted((p for p in prefixes if key.startswith(p)), key=len, reverse=True):
            rest = key[len(prefix):]
            if rest in (WARPS, STAGES) or TILE_KNOB.fullmatch(rest):
                if isinstance(params[name], int) and not isinstance(params[name], bool):
                    kernels.setdefault(prefix, {})[rest] = (name, params[name])
                break
    return kernels


def largest_tile(knobs: dict) -> tuple[int, str]:
    """(elements, how they were counted) of a kernel's largest tile: the product of its block sizes, or for a GEMM
    (a BLOCK_K) the largest of its output tile and its operand tiles BLOCK_K x each other dimension."""
    blocks = {rest: value for rest, (_, value) in knobs.items() if rest not in (WARPS, STAGES)}
    contraction = [r for r in blocks if (TILE_KNOB.fullmatch(r).group("dim") or "") == "K"]
    others = [r for r in blocks if r not in contraction]
    tiles = [others] if others else []
    tiles += [[k, d] for k in contraction for d in others] or [[k] for k in contraction]
    if not tiles:
        return 0, ""
    best = max(tiles, key=lambda tile: math.prod(blocks[r] for r in tile))
    names = [knobs[r][0] for r in best]
    return math.prod(blocks[r] for r in best), f"{'*'.join(names)} = {'*'.join(str(blocks[r]) for r in best)}"


def register_budget(threads: int, profile: HardwareProfile) -> int:
    """The registers one of `threads` threads of a block can have: the per-thread limit, or its share of the
    registers a block may hold (a block of 1024 threads: 64 each)."""
    return min(profile.max_registers_per_thread, profile.registers_per_block // threads)


def _register_violation(knobs: dict, profile: HardwareProfile) -> str:
    if WARPS not in knobs:  # the launch's warps are not a knob: unknown here
        return ""
    elements, counted = largest_tile(knobs)
    warps = knobs[WARPS][1]
    threads = warps * WARP_SIZE
    per_thread, budget = -(-elements // threads), register_budget(threads, profile)
    if per_thread <= budget:
        return ""
    share = (f" ({profile.registers_per_block} per block of {threads} threads)"
             if budget < profile.max_registers_per_thread else "")
    return (f"{counted} elements over {knobs[WARPS][0]}={warps} ({threads} threads) is {per_thread} fp32 elements "
            f"per thread; {profile.display_name} gives a thread at most {budget} registers{share}, so the tile "
            f"spills to local memory and can take minutes to compile: use more warps or smaller blocks")


def _shared_memory_violation(knobs: dict, profile: HardwareProfile) -> str:
    dims = {TILE_KNOB.fullmatch(rest).group("dim"): value for rest, (_, value) in knobs.items()
            if rest not in (WARPS, STAGES)}
    if not {"M", "N", "K"} <= set(dims):
        return ""
    block_m, block_n, block_k = dims["M"], dims["N"], dims["K"]
    stages = knobs.get(STAGES, (None, 1))[1]
    smem = (block_m * block_k + block_k * block_n) * WORST_CASE_ELEMENT_BYTES * stages
    if smem <= profile.shared_memory_per_block_bytes:
        return ""
    return (f"tiles {block_m}x{block_n}x{block_k} with {stages} stages need ~{smem // 1024} KiB of shared "
            f"memory; {profile.display_name} has {profile.shared_memory_per_block_bytes // 1024} KiB per block")


def limit_violation(params: dict, profile: HardwareProfile | None) -> str:
    """Why these launch parameters break the profile's limits (threads or shared memory per block) or must spill
    registers, kernel by kernel; "" when they may be compiled."""
    if profile is None:
        return ""
    for prefix, knobs in sorted(kernel_knobs(params).items()):
        kernel = f"kernel {prefix.rstrip('_')}: " if prefix else ""
        if WARPS in knobs and knobs[WARPS][1] * WARP_SIZE > profile.max_threads_per_block:
            name, warps = knobs[WARPS]
            return (f"{name}={warps} needs {warps * WARP_SIZE} threads per block; {profile.display_name} allows "
                    f"{profile.max_threads_per_block}")
        why = _shared_memory_violation(knobs, profile) or _register_violation(knobs, profile)
        if why:
            return kernel + why
    return ""
