"""A hardware profile's GEMM tiles as the tuner's first configurations for a compiler seed's GEMM template kernels."""
from dataclasses import replace

import optuna

from evo.records.store import RunStore
from evo.tuning.tuner import Tuner
from fakes import FakeService
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from kernelevo.core.evaluation_record import EvalResult
from hardware_profiles import load_profile
from hardware_profiles.tiles import tile_starts

NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_WARPS", "NUM_STAGES")
CHOICES = {"BLOCK_M": [64, 128, 256], "BLOCK_N": [64, 128, 256], "BLOCK_K": [32, 64], "GROUP_M": [8],
           "NUM_WARPS": [4, 8], "NUM_STAGES": [3, 4]}
SEED = dict(zip(NAMES, (128, 64, 32, 8, 4, 3)))  # Inductor's pick


def space(*prefixes):
    return {f"{p}{n}": CHOICES[n] for p in prefixes for n in NAMES} | {"XBLOCK": [256, 512]}


def params(*prefixes):
    return {f"{p}{n}": SEED[n] for p in prefixes for n in NAMES} | {"XBLOCK": 512}


def test_every_template_kernel_goes_on_each_tile_it_can_take():
    tiles = [(128, 256, 32, 8, 8, 3), (128, 256, 16, 8, 8, 3), (128, 64, 32, 8, 4, 3), (256, 128, 32, 8, 8, 3)]
    starts = tile_starts(space("K0_", "K1_"), params("K0_", "K1_"), tiles)
    # BLOCK_K 16 is not among the choices (it would not divide K); the third tile is the seed's own configuration
    assert [(s["K0_BLOCK_M"], s["K0_BLOCK_N"]) for s in starts] == [(128, 256), (256, 128)]
    assert all(s["K1_NUM_WARPS"] == 8 and s["K1_BLOCK_N"] == s["K0_BLOCK_N"] and s["XBLOCK"] == 512 for s in starts)
    assert tile_starts({"XBLOCK": [256, 512]}, {"XBLOCK": 512}, tiles) == []  # no template kernel: nothing
    assert tile_starts(space("K0_"), params("K0_"), ()) == []  # a profile without tiles


SOURCE = ("\n".join(f"K0_{n} = {SEED[n]}" for n in NAMES)
          + f"\nTUNABLE = {dict((f'K0_{n}', CHOICES[n]) for n in NAMES)!r}\n")


def by_tile(source: str) -> EvalResult:
    """A time from the tile, so the study has something to rank."""
    return EvalResult(status="ok", time_s=1e-3 / Genome.from_source(source).params["K0_BLOCK_N"])


def asked(service: FakeService) -> list[dict]:
    """What the tuner asked the service for, in order."""
    return [Genome.from_source(source).params for source in service.evaluated]


def test_the_tuner_tries_the_seeds_own_configuration_then_the_profiles_tiles(tmp_path):
    profile = load_profile("h200")
    assert profile.gemm_tiles  # the H200's measured tiles
    service = FakeService(by_tile, profile)
    store = RunStore(tmp_path)
    seed = Individual("0.0", Genome.from_source(SOURCE))
    tuner = Tuner(service, store.optuna_url, trials=4, parallel=2)
    tuned = tuner.tune(seed)
    tuner.close()  # the study is copied into run.db
    store.close()
    expected = [dict(zip((f"K0_{n}" for n in NAMES), tile)) for tile in profile.gemm_tiles]
    assert asked(service)[0] == seed.genome.params
    assert asked(service)[1:4] == expected[:3]
    assert tuned.genome.params["K0_BLOCK_N"] == 256  # the fastest of them, as measured
    study = optuna.load_study(study_name="tune-0.0", storage=store.optuna_url)
    assert [t.params for t in study.trials] == asked(service)


def test_a_profile_without_tiles_tunes_as_before(tmp_path):
    service = FakeService(by_tile, replace(load_profile("h200"), gemm_tiles=()))
    store = RunStore(tmp_path)
    Tuner(service, store.optuna_url, trials=3, parallel=3).tune(Individual("0.0", Genome.from_source(SOURCE)))
    store.close()
    assert asked(service)[0] == Genome.from_source(SOURCE).params
    assert asked(service)[1] != dict(zip((f"K0_{n}" for n in NAMES), load_profile("h200").gemm_tiles[0]))  # TPE's
