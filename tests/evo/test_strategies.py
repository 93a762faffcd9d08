"""The search strategies (evo.evolution.strategy) against the shared fakes of tests/fakes.py (no worker, no kernel):
each obeys the budget, records its lineage as it defines it, and resumes after a kill to the lineage of a run never
killed."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from kernelevo.core.errors import KernelevoError
from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings
from evo.records.store import RunStore
from evo.evolution.strategy import Evolution, Refinement, Sampling, Tree
from kernelevo.core.genome import Genome
from kernelevo.core.evaluation_record import EvalResult
from operators.llm.history import history_lines
from operators.llm.operators import LLMMutation
from fakes import SOURCE, Cross, FakeTuner, Step, lineage, value

STRATEGIES = {"evolution": Evolution, "sampling": Sampling, "refinement": Refinement, "tree": Tree}
EVAL_S = 0.25  # each fake evaluation's own seconds


class TimedTuner(FakeTuner):
    """FakeTuner whose evaluations take EVAL_S seconds each (their eval_wall_s) and whose individuals keep the keys
    of their trials, as the real tuner's record does."""

    def tune(self, individual):
        with self.lock:
            delay, self.tuned = self.rng.random() * self.jitter, self.tuned + 1
            if self.crash_at is not None and self.tuned > self.crash_at:
                raise KeyboardInterrupt("killed")
        time.sleep(delay)
        tried = []
        for w in (0, 1):
            genome = individual.genome.with_params({"W": w})
            result = self.store.evaluation(genome.key)
            if result is None:
                result = EvalResult(status="ok", time_s=self.time_of(genome), eval_wall_s=EVAL_S)
                self.store.add_evaluation(genome.key, result)
            tried.append((genome, result))
        genome, result = min(tried, key=lambda pair: pair[1].time_s)
        return individual.tuned(genome, result, 2, {"trials": [{"key": g.key} for g, _ in tried]})


def run(tmp_path, strategy, operators=None, in_flight=4, crash_at=None, team=None, **budget):
    store = RunStore(tmp_path)
    settings = SearchSettings(mu=3, lambda_=4, parallel=in_flight,
                              budget=Budget(**{"generations": 4, "patience": None, **budget}))
    tuner = TimedTuner(store, crash_at=crash_at)
    seeds = [(Genome.from_source(SOURCE.format(v=0)), "seed")]
    return Search(seeds, operators or [Step(), Cross(weight=0.5)], tuner, store, settings, team=team,
                  strategy=STRATEGIES[strategy]() if isinstance(strategy, str) else strategy), store


def children(store):
    return [ind for ind in store.individuals() if ind.generation > 0]


def test_evolution_is_the_default_lineage(tmp_path):
    default, store = run(tmp_path / "default", None)
    default.run()
    chosen, chosen_store = run(tmp_path / "chosen", "evolution")
    chosen.run()
    assert lineage(store) == lineage(chosen_store) and len(children(store)) == 16
    assert {ind.operator for ind in children(store)} == {"step", "cross"}


def test_sampling_makes_every_child_from_the_seed_and_tells_it_only_generation_0(tmp_path):
    seen = []

    class Seeing(Step):
        def __call__(self, parents, rng, context):
            seen.append(tuple(ind.id for ind in context.archive))
            return super().__call__(parents, rng, context)

    s, store = run(tmp_path, "sampling", operators=[Seeing(), Cross()])
    s.run()
    made = children(store)
    assert all(ind.parents == ("0.0",) and ind.operator == "step" for ind in made)
    assert sorted(value(ind.genome) for ind in made) == [v for v in range(-4, 10) if v]  # every child of V=0 there is
    assert set(seen) == {("0.0",)}  # independent samples: no child told of another


def test_refinement_makes_each_child_from_the_best_before_it(tmp_path):
    s, store = run(tmp_path, "refinement")
    s.run()
    folded = store.individuals()
    assert s.settings.children_in_flight == 1 and len(folded) == 17
    for i, ind in enumerate(folded[1:], start=1):
        best = min((earlier for earlier in folded[:i] if earlier.ok), key=lambda e: e.time_s)
        assert ind.parents == (best.id,)
    assert len({ind.parents for ind in folded[1:]}) > 1  # the best moved: one lineage, not samples of the seed


class Watched(Tree):
    """The tree, recording each choice: (epsilon, nodes to choose from, whether it chose the fastest)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.choices = []

    def parents(self, select, population, archive, arity, rng):
        chosen = super().parents(select, population, archive, arity, rng)
        fastest = min((node for node in archive if node.ok), key=lambda node: node.time_s)
        attempts = sum(1 for node in archive if node.generation > 0)
        self.choices.append((self.epsilon_after(attempts), len(archive), chosen[0].id == fastest.id))
        return chosen


def test_the_tree_expands_the_best_node_more_as_epsilon_decays(tmp_path):
    tree = Watched(epsilon=1.0, decay=0.8, min_epsilon=0.05)
    assert tree.epsilon_after(0) == 1.0 and tree.epsilon_after(2) == pytest.approx(0.64)
    assert tree.epsilon_after(20) == 0.05
    s, store = run(tmp_path, tree, generations=8, in_flight=1)
    s.run()
    folded = store.individuals()
    for i, ind in enumerate(folded[1:], start=1):
        assert set(ind.parents) <= {node.id for node in folded[:i]}  # a node of the tree as it stood
    early = [best for epsilon, nodes, best in tree.choices if epsilon >= 0.4 and nodes >= 3]
    late = [best for epsilon, nodes, best in tree.choices if epsilon == 0.05]
    assert len(early) >= 4 and not all(early)  # explores while epsilon is high ...
    assert len(late) >= 8 and sum(late) >= 0.8 * len(late)  # ... and expands the best once it has decayed


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_obeys_the_evaluation_and_seconds_budgets(tmp_path, strategy):
    s, store = run(tmp_path / "e", strategy, generations=50, max_evaluations=12)
    assert s.run()["stop_reason"] == "evaluation budget of 12 spent"
    assert 12 <= store.evaluation_count() < 12 + 2 * s.settings.children_in_flight
    s, store = run(tmp_path / "s", strategy, generations=50, max_gpu_s=3.0)
    assert s.run()["stop_reason"] == "evaluation-seconds budget of 3 s spent"
    assert 3.0 <= store.evaluation_seconds() < 3.0 + 2 * EVAL_S * s.settings.children_in_flight


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_resumes_after_a_kill_to_the_lineage_of_one_never_killed(tmp_path, strategy):
    whole, whole_store = run(tmp_path / "whole", strategy)
    whole.run()
    killed, store = run(tmp_path / "killed", strategy, crash_at=9)
    with pytest.raises(KeyboardInterrupt):
        killed.run()
    assert 0 < store.latest_checkpoint().children < 16
    store.close()
    resumed, store = run(tmp_path / "killed", strategy)
    assert resumed.run()["stop_reason"] == "4 generations done"
    assert lineage(store) == lineage(whole_store)
    assert all(store.individual(parent) is not None for ind in children(store) for parent in ind.parents)


def test_strategies_of_one_parent_refuse_crossovers_alone_and_islands(tmp_path):
    with pytest.raises(KernelevoError, match="sampling makes each child from one parent.*add a mutation"):
        run(tmp_path / "a", "sampling", operators=[Cross()])
    run(tmp_path / "b", "tree", operators=[Cross()])  # the tree gives a crossover two distinct nodes
    store = RunStore(tmp_path / "c")
    with pytest.raises(KernelevoError, match="search.islands=1, or use search/strategy=evolution"):
        Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [Step()], FakeTuner(store), store,
               SearchSettings(islands=2), strategy=Tree())
    with pytest.raises(KernelevoError, match="epsilon"):
        Tree(epsilon=0.1, min_epsilon=0.2)


class Team:
    """The face of the LLM team the LLM mutation sees: the planner records the history it is told."""

    def __init__(self):
        self.told, self.lock = {}, threading.Lock()
        self.client = type("Client", (), {"cut_at": lambda self, deadline: None})()
        self.context = SimpleNamespace(baked=lambda individuals: frozenset())  # no kernel holds test sizes

    def plan(self, parent, archive, duplicates=(), profiles=None, attempts=(), rank=1, independent=False):
        with self.lock:
            self.told[parent.id, len(archive)] = [ind.id for ind in attempts]
        return "1. change V"

    def code(self, parent, plan):
        return SOURCE.format(v=value(parent.genome) + 1 + len(self.told) % 3)


def test_refinement_tells_the_llm_every_attempt_so_far_and_the_history_is_written_for_it(tmp_path):
    team = Team()
    s, store = run(tmp_path, "refinement", operators=[LLMMutation(debug_tries=0)], team=team, generations=2)
    s.run()
    made = children(store)
    assert len(made) == 8
    histories = sorted(team.told.values(), key=len)
    assert histories == [[ind.id for ind in made[:i]] for i in range(8)]  # each told every attempt before it
    lines = history_lines(tuple(made[:3]), tuple(store.individuals()), ("1. a plan that repeated",), limit=2)
    assert [line.split(" ")[1] for line in lines[:2]] == [made[1].id, made[2].id]
    assert "already exists" in lines[2] and len(lines) == 3


def test_children_in_flight_do_not_change_a_strategys_lineage(tmp_path):
    lineages = []
    for in_flight in (1, 4):
        s, store = run(tmp_path / str(in_flight), Tree(), in_flight=in_flight)
        s.tuner.jitter = 0.02
        with ThreadPoolExecutor(1) as pool:  # from another thread, as a run's own
            pool.submit(s.run).result()
        lineages.append(lineage(store))
    assert lineages[0] == lineages[1]
