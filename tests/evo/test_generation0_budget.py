"""Generation 0's own cap within the search's wall-time budget (``search.generation0_s``, issue 65): a 15 s search's
generation 0 (the seeds judged and tuned) took the whole window, leaving the children none. With the cap, generation
0's evaluations are cut at it and the children get the rest of the window; without it, nothing changes."""
import pytest

from kernelevo.core.errors import KernelevoError
from kernelevo.core.genome import Genome
from evo.evolution.search import Search
from evo.records.store import RunStore
from evo.settings import Budget, SearchSettings
from fakes import SOURCE, FakeTuner, Step


class CutWatcher(FakeTuner):
    """The fake tuner, noting the service's cut when each individual's tuning begins: (generation, cut)."""

    def __init__(self, store):
        super().__init__(store, jitter=0.0)
        self.cuts = []

    def tune(self, individual):
        self.cuts.append((individual.generation, self.service.cut))
        return super().tune(individual)


def cuts_of(tmp_path, **budget) -> tuple[set, set]:
    store = RunStore(tmp_path / "run")
    tuner = CutWatcher(store)
    settings = SearchSettings(mu=2, lambda_=2, budget=Budget(generations=1, patience=None, **budget))
    Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [Step()], tuner, store, settings, spent_s=0.5).run()
    store.close()
    return ({cut for generation, cut in tuner.cuts if generation == 0},
            {cut for generation, cut in tuner.cuts if generation > 0})


def test_generation_0_is_cut_at_its_own_cap_and_the_children_get_the_rest_of_the_window(tmp_path):
    (seeds,), (children,) = cuts_of(tmp_path, wall_time_s=30.0, generation0_s=2.0)
    # both deadlines counted from the search's start, less the 0.5 s the seeds' judging spent before it
    assert children - seeds == pytest.approx(28.0)


def test_without_a_cap_or_with_one_past_the_window_generation_0_has_the_searchs_deadline(tmp_path):
    for budget, name in (({"wall_time_s": 30.0}, "none"), ({"wall_time_s": 30.0, "generation0_s": 60.0}, "past")):
        (seeds,), (children,) = cuts_of(tmp_path / name, **budget)
        assert seeds == children


def test_a_cap_without_a_window_still_cuts_generation_0_and_nothing_after(tmp_path):
    (seeds,), (children,) = cuts_of(tmp_path, wall_time_s=None, generation0_s=2.0)
    assert seeds is not None and children is None


def test_the_cap_is_checked_like_the_other_budgets():
    with pytest.raises(KernelevoError, match="search.generation0_s must not be negative"):
        Budget(generation0_s=-1.0)
    assert Budget(wall_time_s=15.0, generation0_s=5.0).generation0_wall_s == 5.0
    assert Budget(wall_time_s=15.0, generation0_s=50.0).generation0_wall_s == 15.0
    assert Budget(wall_time_s=None).generation0_wall_s is None
