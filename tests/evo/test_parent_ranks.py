"""Issue 66, point 2: ranks counted per parent. The k-th child an operator makes from a parent is told rank k
(``OperatorContext.rank``), counted over every generation -- every rank once, in the children's order, whatever their
slot, however many run at once -- and a resumed run tells the children it remakes the ranks a run never killed told
them. Sampling's children are independent (no ranking). Against the shared fakes (no LLM, no worker)."""
from dataclasses import dataclass, field
from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelevo.core.genome import Genome
from evo.evolution.ranks import ParentRanks
from evo.evolution.search import Search
from evo.evolution.strategy import Sampling, Tree
from evo.records.store import RunStore
from evo.settings import Budget, SearchSettings
from fakes import SOURCE, FakeTuner, Step, value
from operators.base import CURRENT_CHILD


@dataclass(frozen=True, kw_only=True)
class Ranked(Step):
    """Step, recording for each call the child, its parent, the rank and whether it is independent."""

    told: list = field(default_factory=list, compare=False, hash=False)

    def __call__(self, parents, rng, context):
        self.told.append((CURRENT_CHILD.get().id, parents[0].id, context.rank, context.independent))
        return [Genome.from_source(SOURCE.format(v=value(parents[0].genome) + rng.randint(1, 9)))]


def search(path, strategy, in_flight=4, crash_at=None, generations=4):
    store = RunStore(path)
    operator = Ranked()
    settings = SearchSettings(mu=3, lambda_=4, parallel=in_flight,
                              budget=Budget(generations=generations, patience=None))
    tuner = FakeTuner(store, crash_at=crash_at, jitter=0.02)
    return Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [operator], tuner, store, settings,
                  strategy=strategy), operator, store


def first_draws(told) -> dict:
    """child id -> (parent, rank) of its first call."""
    firsts: dict = {}
    for child, parent, rank, _ in told:
        firsts.setdefault(child, (parent, rank))
    return firsts


def order(child: str) -> tuple:
    return tuple(int(part) for part in child.split("."))


def test_the_kth_child_of_a_parent_over_all_generations_is_told_rank_k(tmp_path):
    told = []
    for in_flight in (1, 4):
        s, operator, _ = search(tmp_path / str(in_flight), Tree(epsilon=0.3), in_flight=in_flight)
        with ThreadPoolExecutor(1) as pool:  # from another thread, as a run's own
            pool.submit(s.run).result()
        told.append(first_draws(operator.told))
    assert told[0] == told[1]  # the same ranks with one child in flight or four
    by_parent: dict = {}
    for child in sorted(told[1], key=order):
        parent, rank = told[1][child]
        by_parent.setdefault(parent, []).append((child, rank))
    for parent, children in by_parent.items():
        assert [rank for _, rank in children] == list(range(1, len(children) + 1)), (parent, children)
    spread = [children for children in by_parent.values() if len({c.split(".")[0] for c, _ in children}) > 1]
    assert spread and max(rank for children in spread for _, rank in children) >= 3  # counted across generations
    assert len(by_parent) > 1  # a new parent starts at rank 1 whatever the slot of its first child
    assert any(rank == 1 and not child.endswith(".0") for children in by_parent.values() for child, rank in children)


def test_a_resumed_search_tells_the_children_it_remakes_their_ranks(tmp_path):
    whole, operator, _ = search(tmp_path / "whole", Tree(epsilon=0.3))
    whole.run()
    killed, _, store = search(tmp_path / "killed", Tree(epsilon=0.3), crash_at=9)
    with pytest.raises(KeyboardInterrupt):
        killed.run()
    checkpoint = store.latest_checkpoint()
    assert 0 < checkpoint.children < 16 and sum(checkpoint.ranks.values()) == checkpoint.children
    store.close()
    resumed, again, _ = search(tmp_path / "killed", Tree(epsilon=0.3))
    resumed.run()
    expected = first_draws(operator.told)
    assert first_draws(again.told) == {child: expected[child] for child in first_draws(again.told)}
    assert len(first_draws(again.told)) >= 16 - checkpoint.children


def test_sampling_children_are_independent_and_still_counted(tmp_path):
    s, operator, _ = search(tmp_path, Sampling(), generations=2)
    s.run()
    told = first_draws(operator.told)
    assert all(independent for *_, independent in operator.told)
    assert sorted(rank for _, rank in told.values()) == list(range(1, 9))  # attempt k of the seed: 8 distinct


def test_a_child_that_drew_nothing_does_not_hold_up_the_next():
    ranks = ParentRanks({"op:1.0": 2}, first=5)
    assert ranks.rank(5, "op:1.0", first_draw=True) == 3
    ranks.skip(6)
    assert ranks.rank(7, "op:1.0", first_draw=True) == 4 and ranks.rank(7, "op:2.0", first_draw=False) == 1
    ranks.fold(5), ranks.fold(6)
    ranks.ready(7)  # child 7 reserved its calls: child 8 may take its rank
    assert ranks.counts == {"op:1.0": 3} and ranks.rank(8, "op:1.0", first_draw=True) == 5
