"""Issue 66: off a GPU no timing pretends to be a speed. On Triton's CPU interpreter the search ranks kernels by a
stated proxy (``kernelevo.core.individual.ranked_by``: the Triton launches its judge counted), never by interpreter
wall-clock; on a GPU by the measured time; summary.json names which."""
import json
from random import Random

from deap import tools

from kernelevo.core.genome import Genome
from kernelevo.core.individual import GPU_TIME, LAUNCHES, Individual, ranked_by
from evo.evolution.search import Search
from evo.evolution.selection import EpsilonGreedy, Tournament
from evo.evolution.strategy import Refinement
from evo.records.store import RunStore
from evo.reports.outcome import outcome_of
from evo.settings import Budget, SearchSettings
from fakes import SOURCE, FakeTuner, Step, value
from kernelevo.core.evaluation_record import EvalResult


def kernel(ident: str, v: int, time_s: float, launches: int, timer: str = "interpreter") -> Individual:
    result = EvalResult("ok", time_s=time_s, timer=timer, guards={"triton_launches": launches})
    return Individual(ident, Genome.from_source(SOURCE.format(v=v)), result=result, generation=1)


def test_on_the_interpreter_a_kernel_slower_by_its_wall_clock_but_better_by_the_proxy_is_chosen():
    quick, lean = kernel("1.0", 1, time_s=0.1, launches=6), kernel("1.1", 2, time_s=0.3, launches=2)
    assert ranked_by(quick.result) == LAUNCHES and (quick.rank, lean.rank) == (6.0, 2.0)
    assert tools.selBest([quick, lean], 1) == [lean]
    fame = tools.HallOfFame(2)
    fame.update([quick, lean])
    assert fame[0].id == lean.id
    assert Tournament(2)([quick, lean], [], 1, Random(0)) == [lean]
    assert EpsilonGreedy(0.0)([], [quick, lean], 1, Random(0)) == [lean]  # the tree's node
    assert Refinement().parents(None, [], [quick, lean], 1, Random(0)) == [lean]  # the current best
    outcome = json.loads(outcome_of(lean, None, None, "seed").to_json())
    assert outcome["ranked_by"] == LAUNCHES and "launches" in outcome["ranked_by"]


def test_on_a_gpu_the_measured_time_ranks():
    quick, lean = (kernel("1.0", 1, 0.1, 6, timer="cuda-events"), kernel("1.1", 2, 0.3, 2, timer="cuda-events"))
    assert ranked_by(quick.result) == GPU_TIME and tools.selBest([quick, lean], 1) == [quick]
    assert json.loads(outcome_of(quick, None, None, "seed").to_json())["ranked_by"] == GPU_TIME


class InterpreterTuner(FakeTuner):
    """Interpreter verdicts where the larger |V|, the faster by wall-clock and the more launches."""

    def tune(self, individual):
        v = abs(value(individual.genome))
        result = EvalResult("ok", time_s=1.0 / (1 + v), timer="interpreter", guards={"triton_launches": 10 + v})
        self.store.add_evaluation(individual.genome.key, result)
        return individual.tuned(individual.genome, result, 1)


def test_a_search_on_the_interpreter_keeps_the_kernel_with_fewest_launches_not_the_quickest(tmp_path):
    store = RunStore(tmp_path)
    settings = SearchSettings(mu=3, lambda_=4, parallel=2, budget=Budget(generations=3, patience=None))
    seeds = [(Genome.from_source(SOURCE.format(v=5)), "seed")]
    tuner = InterpreterTuner(store)
    state = Search(seeds, [Step()], tuner, store, settings).run()
    made = {ind.id: ind for ind in store.individuals()}
    best = made[state["hall_of_fame"][0]]
    assert best.rank == min(ind.rank for ind in made.values())  # fewest launches
    assert best.time_s > min(ind.time_s for ind in made.values())  # though a quicker one was made
    store.close()
