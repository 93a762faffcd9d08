"""The search's deadline holds: at its wall-time budget, evaluations still running are cut -- their worker processes
killed -- not only new ones refused; the run counts how many it cut (store, summary, bench row)."""
import time

from conftest import candidate, make_evaluator
from evo.evaluation import EvaluationService
from evo.outcome import summarise
from evo.search import Budget, Search, SearchSettings
from evo.store import RunStore
from evo.tuner import Tuner
from core.genome import Genome
from fitness.result import CANCELLED
from operators.param_mutation import ParamMutation

BUDGET_S = 3.0


def test_an_evaluation_running_at_the_cut_is_killed_and_answers_cancelled_with_where_it_was():
    with make_evaluator(timeout_s=120) as ev:
        ev.cut_at = time.perf_counter() + 1.5
        started = time.perf_counter()
        result = ev.evaluate(candidate("hang"))  # loops for ever in forward: only the cut ends it before 120 s
        took = time.perf_counter() - started
        ev.cut_at = None
        assert ev.evaluate(candidate("good")).ok  # the next job, with no cut, is judged as ever
    assert result.status == CANCELLED and took < 20, (result.status, took)
    assert result.reason.startswith("cut: the search's budget was spent while it was ") and "killed" in result.reason


def test_a_search_whose_evaluation_outlives_its_budget_ends_at_the_budget_and_says_how_many_it_cut(tmp_path):
    store = RunStore(tmp_path)
    service = EvaluationService([make_evaluator(timeout_s=120)], store, parallel=2)
    settings = SearchSettings(mu=2, lambda_=2, budget=Budget(generations=3, wall_time_s=BUDGET_S, patience=None))
    seed = Genome.from_source(candidate("hang"))  # its evaluation never ends by itself
    search = Search([(seed, "seed")], [ParamMutation()], Tuner(service, None, trials=1), store, settings)
    try:
        started = time.perf_counter()
        state = search.run()
        took = time.perf_counter() - started
        assert took < BUDGET_S + 5, took  # not the evaluation's 120 s timeout
        assert "wall-time budget" in state["stop_reason"], state["stop_reason"]
        assert service.cut == 1 and store.evaluations_cut() == 1
        assert store.evaluation(store.individual("0.0").key) is None  # no verdict stored for the kernel cut
        assert summarise(store, store.latest_checkpoint()).evaluations_cut == 1  # summary.json, the bench's row
    finally:
        service.close()
        store.close()
