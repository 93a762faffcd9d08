"""Launch configurations a GPU cannot run well are found before anything is compiled: a tile with more fp32 elements
per thread than a thread has registers (hardware_profiles/limits.py), kernel by kernel, while every bundled seed's
own configuration, every Inductor capture's and every GEMM tile a profile lists pass."""
import json
from pathlib import Path

import pytest

from conftest import FIXTURES
from kernelevo.core.genome import Genome
from fitness.problems.problem import SUITE_DIR, resolve_problem
from hardware_profiles import available_profiles, load_profile
from hardware_profiles.limits import kernel_knobs, limit_violation
from kernelevo.seeds.inductor.convert import convert
from hardware_profiles.tiles import TILE_PARAMS

H100 = load_profile("h100_sxm")


def test_a_reduction_block_of_65536_over_one_warp_is_refused_naming_elements_per_thread_and_the_profile():
    """The issue's configuration: Optuna proposed it for LogSoftmax, and its compile held a slot for 45 s."""
    why = limit_violation({"K0_XBLOCK": 1, "K0_R0_BLOCK": 65536, "K0_NUM_WARPS": 1, "K0_NUM_STAGES": 1}, H100)
    assert why.startswith("kernel K0: K0_XBLOCK*K0_R0_BLOCK = 1*65536 elements over K0_NUM_WARPS=1 (32 threads)")
    assert "2048 fp32 elements per thread" in why and "NVIDIA H100 SXM5 80GB" in why and "255 registers" in why
    # the same block over 16 warps is 128 values a thread: it may be compiled
    assert limit_violation({"K0_XBLOCK": 1, "K0_R0_BLOCK": 65536, "K0_NUM_WARPS": 16, "K0_NUM_STAGES": 1}, H100) == ""


def test_a_block_of_1024_threads_shares_the_register_file_64_registers_each():
    big = {"XBLOCK": 128, "R0_BLOCK": 1024, "NUM_WARPS": 32}  # 131072 elements: 128 a thread
    assert "at most 64 registers (65536 per block of 1024 threads)" in limit_violation(big, H100)
    assert limit_violation({**big, "XBLOCK": 64}, H100) == ""  # 64 a thread: the whole share, no more


def test_a_gemm_is_judged_by_its_accumulator_and_operand_tiles_not_their_product():
    ok = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "NUM_WARPS": 8, "NUM_STAGES": 2}
    assert limit_violation(ok, H100) == ""  # 128 accumulator values a thread; M*N*K would be 8192
    assert "BLOCK_M*BLOCK_N = 256*256" in limit_violation({**ok, "BLOCK_M": 256, "NUM_STAGES": 1}, H100)
    operand = {"BLOCK_M": 16, "BLOCK_N": 256, "BLOCK_K": 128, "NUM_WARPS": 4, "NUM_STAGES": 1}
    assert "BLOCK_K*BLOCK_N = 128*256 elements" in limit_violation(operand, H100)
    assert "shared memory" in limit_violation({**ok, "BLOCK_K": 128, "NUM_STAGES": 4}, H100)


def test_each_kernel_of_a_genome_is_judged_on_its_own_knobs():
    two = {"K0_XBLOCK": 16384, "K0_NUM_WARPS": 8, "K1_XBLOCK": 16384, "K1_NUM_WARPS": 8, "K1_NUM_STAGES": 1}
    assert limit_violation(two, H100) == ""  # 64 a thread each, not 16384 * 16384
    assert limit_violation({**two, "K1_NUM_WARPS": 1}, H100).startswith("kernel K1: K1_XBLOCK = 16384 elements")
    knobs = kernel_knobs({"NORM_BLOCK": 8, "NORM_NUM_WARPS": 1, "num_warps": 2, "BLOCK_SIZE": 64, "GROUP_M": 8,
                          "K0_A_KMAJOR": 1})  # a prefix is a kernel when it has warps or stages; the rest is no tile
    assert knobs == {"NORM_": {"BLOCK": ("NORM_BLOCK", 8), "NUM_WARPS": ("NORM_NUM_WARPS", 1)},
                     "": {"NUM_WARPS": ("num_warps", 2), "BLOCK_SIZE": ("BLOCK_SIZE", 64)}}


def test_without_a_warps_knob_nothing_is_predicted_but_thread_and_shared_memory_limits_still_hold():
    assert limit_violation({"BLOCK_SIZE": 65536}, H100) == ""  # the launch's num_warps is not known here
    assert limit_violation({"NUM_WARPS": 64}, H100).startswith("NUM_WARPS=64 needs 2048 threads per block")
    assert limit_violation({"K0_XBLOCK": 1, "K0_R0_BLOCK": 65536, "K0_NUM_WARPS": 1}, None) == ""


def test_the_interpreter_profile_refuses_what_the_gpu_it_stands_for_cannot_run_well():
    for config in ({"K0_R0_BLOCK": 65536, "K0_NUM_WARPS": 1}, {"BLOCK_R": 64, "BLOCK_N": 256, "NUM_WARPS": 2}):
        assert limit_violation(config, load_profile("cpu_interpreter")) != ""
        assert limit_violation(config, H100) != ""


def seed_params(inductor: bool) -> list:
    """(where, default params) of every bundled seed, and with `inductor` of every Inductor capture (made on an H100)
    converted for the GPU."""
    found = [(f"{d.name} seed", Genome.from_source((d / "seed.py").read_text()).params)
             for d in sorted(SUITE_DIR.iterdir()) if (d / "seed.py").is_file()]
    for path in sorted(FIXTURES.glob("*.json")) if inductor else ():
        captured = json.loads(path.read_text())
        spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
        source = convert(captured, Path(spec.path).read_text(), spec.name, interpreter=False)
        found.append((f"Inductor {path.stem}", Genome.from_source(source).params))
    return found


@pytest.mark.parametrize("profile", available_profiles())
def test_every_seeds_own_configuration_and_every_listed_gemm_tile_may_be_compiled(profile):
    hardware = load_profile(profile)
    hopper = hardware.compute_capability == "9.0" or hardware.kind == "interpreter"  # where the captures were made
    params = seed_params(inductor=hopper)
    assert len(params) >= (14 if hopper else 11)
    assert not hopper or any(any(k.startswith("K0_") for k in values) for _, values in params)
    for where, values in params:
        assert limit_violation(values, hardware) == "", where
    for tile in hardware.gemm_tiles:
        for prefix in ("", "K0_"):
            assert limit_violation({f"{prefix}{n}": v for n, v in zip(TILE_PARAMS, tile)}, hardware) == "", tile


def test_a_gemm_capture_from_an_h100_does_not_fit_the_shared_memory_of_an_ada_gpu():
    """Inductor's 5-stage fp32 tile for the H100 needs 120 KiB of shared memory; an L40S has 99 KiB a block."""
    (params,) = [values for where, values in seed_params(inductor=True) if where == "Inductor matmul_template"]
    assert "need ~120 KiB of shared memory; NVIDIA L40S has 99 KiB" in limit_violation(params, load_profile("l40s"))
