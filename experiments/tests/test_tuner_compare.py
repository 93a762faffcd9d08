"""The tuner comparison (experiments/tuner_compare.py) on the fake service's synthetic landscape (moved from
tests/evo/test_tuner.py: the product's tests import no experiment code)."""
from experiments.tuner_compare import compare, summarise
from fakes import TUNER_SEED, LandscapeService


def test_samplers_compared_on_a_synthetic_landscape():
    """The comparison the GPU experiment makes, on the fake service: equal trials per arm, the warm-started arm's
    children starting from their ancestors' trials, and (deterministically: seeded samplers, a fixed landscape) the
    warm-started TPE ahead of random search and of fresh TPE studies once the lineage has a second generation."""
    arms = compare(LandscapeService(), TUNER_SEED, seeds=12, generations=4, trials=6, parallel=3)
    assert {arm: {len(run["curve"]) for run in runs} for arm, runs in arms.items()} == \
        {arm: {24} for arm in ("random", "tpe", "tpe_warm")}
    for arm, runs in arms.items():
        warm = [ind["warm_start"] for run in runs for ind in run["tuning"]]
        assert (max(warm) > 0) == (arm == "tpe_warm") and all(ind["sampler"] == arm.split("_")[0]
                                                               for run in runs for ind in run["tuning"])
        assert all(run["curve"] == sorted(run["curve"], reverse=True) for run in runs)  # anytime: never worse
    ratio = {arm: row["ratio_at"] for arm, row in summarise(arms, [12, 24])["arms"].items()}
    assert all(ratio["tpe_warm"][k] < min(ratio["random"][k], ratio["tpe"][k]) for k in (12, 24)), ratio
