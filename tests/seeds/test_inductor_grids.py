"""The converter's launch grids (kernelevo/seeds/inductor/grids.py) are Inductor's: every grid type of the installed
torch is
either written the way Inductor's own GridExpr computes it, or refused with a SeedError naming it."""
import inspect

import pytest
import triton
import torch._inductor.runtime.triton_heuristics as heuristics

from kernelevo.seeds.inductor.convert import SeedError
from kernelevo.seeds.inductor.grids import REFUSED, YZ_OVERFLOW_HELPER, launch_grid

NUMELS = {"xnumel": 1000, "ynumel": 300, "znumel": 7, "r0_numel": 513}
# per grid type: the launch configuration's constexprs and the numels its kernels take
CASES = {
    "Grid1D": ({"XBLOCK": 64}, ["xnumel"]),
    "Grid2D": ({"XBLOCK": 32, "YBLOCK": 16}, ["xnumel", "ynumel"]),
    "Grid3D": ({"XBLOCK": 8, "YBLOCK": 4, "ZBLOCK": 2}, ["xnumel", "ynumel", "znumel"]),
    "BatchMatmulGrid3D": ({"XBLOCK": 8, "YBLOCK": 4, "ZBLOCK": 2}, ["xnumel", "ynumel", "znumel"]),
    "CooperativeReductionGrid": ({"XBLOCK": 4, "RSPLIT": 8, "R0_BLOCK": 64}, ["xnumel", "r0_numel"]),
    "SplitScanGrid": ({"XBLOCK": 1, "R0_BLOCK": 128}, ["xnumel", "r0_numel"]),
    "MixOrderReductionGrid": ({"XBLOCK": 16, "RSPLIT_SIZE": 64, "R0_BLOCK": 32}, ["xnumel", "r0_numel"]),
}


def ours(grid_type: str, config: dict, numels: dict, meta: dict | None = None, extra=None) -> tuple:
    constants = {f"K0_{k}": v for k, v in config.items()}
    expression = launch_grid("k", grid_type, {n: n for n in numels}, {k: f"K0_{k}" for k in config}, extra,
                             meta or {"grid_type": grid_type})
    scope = {"triton": triton, **constants, **numels, "_grid_0": 5, "_grid_1": 6, "_grid_2": 7}
    exec(YZ_OVERFLOW_HELPER, scope)
    return tuple(eval(expression, scope)) + (1,) * (3 - len(eval(expression, scope)))


def inductors(grid_type: str, config: dict, numels: dict, meta: dict | None = None) -> tuple:
    grid = heuristics.GridExpr.from_meta(meta or {"grid_type": grid_type}, config)
    return tuple(int(v) for v in grid.eval_slow({**numels, "_grid_0": 5, "_grid_1": 6, "_grid_2": 7}))


@pytest.mark.parametrize("grid_type", sorted(CASES))
def test_each_grid_is_the_one_inductor_computes_for_the_same_sizes_and_block_sizes(grid_type):
    config, dims = CASES[grid_type]
    numels = {d: NUMELS[d] for d in dims}
    assert ours(grid_type, config, numels) == inductors(grid_type, config, numels)
    other = {k: v * 2 if k != "XBLOCK" or v > 1 else v for k, v in config.items()}  # a tuned configuration
    assert ours(grid_type, other, numels) == inductors(grid_type, other, numels)


@pytest.mark.parametrize("ynumel", [300, 65535 * 3 + 17])
def test_a_y_extent_over_the_limit_spills_into_z_as_inductor_has_it(ynumel):
    config, numels = {"XBLOCK": 16, "YBLOCK": 1}, {"xnumel": 40, "ynumel": ynumel}
    got = ours("Grid2DWithYZOverflow", config, numels)
    assert got == inductors("Grid2DWithYZOverflow", config, numels)
    assert (got[2] > 1) == (ynumel > 65535) and got[1] <= 65535


def test_a_fixed_grid_takes_its_extents_from_the_launchs_extra_arguments():
    meta = {"grid_type": "FixedGrid", **heuristics.FixedGrid.setup_grid_as_args()}
    assert ours("FixedGrid", {}, {}, meta, ["_grid_0", "_grid_1", "_grid_2"]) == \
        inductors("FixedGrid", {}, {}, meta) == (5, 6, 7)
    with pytest.raises(SeedError, match="FixedGrid"):
        launch_grid("k", "FixedGrid", {}, {}, [], meta)


def test_every_grid_type_of_the_installed_torch_is_written_or_refused_by_name():
    types = {name for name, cls in inspect.getmembers(heuristics, inspect.isclass)
             if issubclass(cls, heuristics.GridExpr) and cls is not heuristics.GridExpr}
    assert types - set(REFUSED) - {"FixedGrid", "Grid2DWithYZOverflow"} <= set(CASES), "a new grid type"
    for grid_type in REFUSED:
        with pytest.raises(SeedError, match=f"grid type {grid_type} is not converted"):
            launch_grid("k", grid_type, {"xnumel": "8"}, {"XBLOCK": "K0_XBLOCK"})
    with pytest.raises(SeedError, match="'NewGrid' is unknown to the converter"):
        launch_grid("k", "NewGrid", {"xnumel": "8"}, {"XBLOCK": "K0_XBLOCK"})
    with pytest.raises(SeedError, match="needs ynumel"):
        launch_grid("k", "Grid2D", {"xnumel": "8"}, {"XBLOCK": "K0_XBLOCK"})
