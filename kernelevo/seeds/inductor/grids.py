"""The launch grid of each kind of kernel Inductor writes, as Python over the kernel's tunable block sizes.

Inductor names a kernel's grid by its ``grid_type`` (``inductor_meta``): one ``GridExpr`` subclass of
``torch/_inductor/runtime/triton_heuristics.py`` each. ``launch_grid`` writes the same grid, with the block sizes
as the candidate's constants (so a tuned block size changes the grid with it) and the sizes as the launch's
arguments. Grid types the converter cannot write (``REFUSED``: their grids are precomputed for one configuration
or span several fused kernels) are a SeedError naming the type. ``tests/seeds/test_inductor_grids.py`` checks every
formula against Inductor's own and that every grid type of the installed torch is either here or refused.
"""
from __future__ import annotations

from kernelevo.seeds.inductor.errors import OTHER_SEEDS, SeedError

MAX_Y_GRID = 65535  # a CUDA grid's y extent at most (Inductor's get_max_y_grid): y beyond it spills into z
YZ_OVERFLOW_HELPER = '''
def yz_overflow_grid(x, y_raw):
    """Inductor's Grid2DWithYZOverflow: y programs beyond the y axis's limit spill over into z."""
    z = triton.cdiv(y_raw, 65535)
    return (x, 0 if z == 0 else triton.cdiv(y_raw, z), z)
'''
# grid type -> why the converter writes no grid for it
REFUSED = {
    "PrecomputedGrid": "its grid is precomputed for each launch configuration (ahead-of-time compilation)",
    "ComboKernelGrid": "a combo kernel (several fused kernels in one launch; inductor config combo_kernels)",
    "SequentialComboKernelGrid": "a combo kernel (several fused kernels in one launch; inductor config combo_kernels)",
    "SequentialFlattenComboKernelGrid": "a combo kernel (several fused kernels in one launch; inductor config "
                                        "combo_kernels)",
    "RoundRobinComboKernelGrid": "a combo kernel (several fused kernels in one launch; inductor config combo_kernels)",
}


def _cdiv(numel: str | None, block: str | None) -> str:
    """Inductor's ceildiv: the numel itself when there is no block size."""
    return numel if block is None else f"triton.cdiv({numel}, {block})"


def launch_grid(kernel: str, grid_type: str, numels: dict, blocks: dict, extra: list[str] | None = None,
                meta: dict | None = None) -> str:
    """The grid expression (a tuple, or a call returning one) of kernel `kernel` of Inductor's `grid_type`.
    `numels`: ``xnumel``, ``ynumel``, ``znumel``, ``r0_numel`` -> the launch's expression for each the kernel takes;
    `blocks`: ``XBLOCK``, ``RSPLIT``, ... -> the candidate's constant holding it; `extra`: the launch's arguments
    after the kernel's own (a fixed grid's extents); `meta`: the kernel's inductor_meta."""
    def cdiv(dim: str, block: str) -> str:
        if f"{dim}numel" not in numels:
            raise SeedError(f"kernel {kernel}: its {grid_type} grid needs {dim}numel, which it does not take; "
                            f"{OTHER_SEEDS}")
        return _cdiv(numels[f"{dim}numel"], blocks.get(block))

    def need(block: str) -> str:
        if block not in blocks:
            raise SeedError(f"kernel {kernel}: its {grid_type} grid needs {block}, which Inductor's configuration "
                            f"does not give; {OTHER_SEEDS}")
        return blocks[block]

    if grid_type in REFUSED:
        raise SeedError(f"kernel {kernel}: Inductor's grid type {grid_type} is not converted: {REFUSED[grid_type]}; "
                        f"{OTHER_SEEDS}")
    if grid_type == "Grid1D":
        return f"({cdiv('x', 'XBLOCK')},)"
    if grid_type == "Grid2D":
        return f"({cdiv('x', 'XBLOCK')}, {cdiv('y', 'YBLOCK')})"
    if grid_type == "Grid3D":
        return f"({cdiv('x', 'XBLOCK')}, {cdiv('y', 'YBLOCK')}, {cdiv('z', 'ZBLOCK')})"
    if grid_type == "BatchMatmulGrid3D":  # the batch (z) on the grid's x axis
        return f"({cdiv('z', 'ZBLOCK')}, {cdiv('y', 'YBLOCK')}, {cdiv('x', 'XBLOCK')})"
    if grid_type == "Grid2DWithYZOverflow":
        return f"yz_overflow_grid({cdiv('x', 'XBLOCK')}, {cdiv('y', 'YBLOCK')})"
    if grid_type == "CooperativeReductionGrid":
        return f"({need('RSPLIT')}, {cdiv('x', 'XBLOCK')})"
    if grid_type == "SplitScanGrid":
        if "xnumel" not in numels:
            raise SeedError(f"kernel {kernel}: its SplitScanGrid grid needs xnumel; {OTHER_SEEDS}")
        return f"({cdiv('r0_', 'R0_BLOCK')}, {numels['xnumel']})"
    if grid_type == "MixOrderReductionGrid":
        if "xnumel" not in numels:
            raise SeedError(f"kernel {kernel}: its MixOrderReductionGrid grid needs xnumel; {OTHER_SEEDS}")
        return f"({_cdiv(numels['xnumel'], need('RSPLIT_SIZE'))},)"
    if grid_type == "FixedGrid":
        return _fixed(kernel, (meta or {}).get("fixed_grid"), (meta or {}).get("extra_launcher_args", []),
                      extra or [])
    raise SeedError(f"kernel {kernel}: Inductor's grid type {grid_type!r} is unknown to the converter (a newer "
                    f"torch?); {OTHER_SEEDS}")


def _fixed(kernel: str, fixed: list | None, names: list, extra: list[str]) -> str:
    """A fixed grid: each extent a literal or one of the launch's extra arguments."""
    if not fixed or len(fixed) != 3:
        raise SeedError(f"kernel {kernel}: its FixedGrid names no grid; {OTHER_SEEDS}")
    values = dict(zip(names, extra))
    extents = [str(e) if isinstance(e, int) else values.get(e) for e in fixed]
    if None in extents:
        raise SeedError(f"kernel {kernel}: its FixedGrid extents {fixed} are not among the launch's arguments; "
                        f"{OTHER_SEEDS}")
    return f"({', '.join(extents)})"
