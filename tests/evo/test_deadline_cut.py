"""The search's deadline holds: at its wall-time budget, evaluations still running are cut -- their worker processes
killed -- not only new ones refused; the run counts how many it cut (store, summary, bench row)."""
import time

from conftest import candidate, make_evaluator
from evo.service.evaluation import EvaluationService
from evo.reports.outcome import summarise
from evo.evolution.search import Search, SearchSettings
from evo.settings import Budget
from evo.records.store import RunStore
from evo.tuning.tuner import Tuner
from kernelevo.core.genome import Genome
from kernelevo.core.evaluation_record import CANCELLED
from operators.param_mutation import ParamMutation

BUDGET_S = 3.0


def test_an_evaluation_running_at_the_cut_is_killed_and_answers_cancelled_with_where_it_was(sandbox):
    with make_evaluator(timeout_s=120, sandbox=sandbox) as ev:  # the pytest worker's fork server: it kills one worker
        ev.cut_running_at(time.perf_counter() + 1.5)
        result = ev.evaluate(candidate("hang"))  # loops for ever in forward: only the cut ends it before 120 s
        ev.cut_running_at(None)
        assert ev.evaluate(candidate("good")).ok  # the next job, with no cut, is judged as ever
    assert result.status == CANCELLED, result.status  # the 120 s timeout would say "timeout"
    assert result.reason.startswith("cut: the search's budget was spent while it was ") and "killed" in result.reason


def test_a_search_whose_evaluation_outlives_its_budget_ends_at_the_budget_and_says_how_many_it_cut(tmp_path, sandbox):
    store = RunStore(tmp_path)
    spares = sandbox.spares  # the service keeps a warm worker per evaluation in flight: given back below
    service = EvaluationService([make_evaluator(timeout_s=120, sandbox=sandbox)], store, parallel=2)
    settings = SearchSettings(mu=2, lambda_=2, budget=Budget(generations=3, wall_time_s=BUDGET_S, patience=None))
    seed = Genome.from_source(candidate("hang"))  # its evaluation never ends by itself
    search = Search([(seed, "seed")], [ParamMutation()], Tuner(service, None, trials=1), store, settings)
    try:
        state = search.run()
        assert "wall-time budget" in state["stop_reason"], state["stop_reason"]
        assert service.cut == 1 and store.evaluations_cut() == 1
        assert store.evaluation(store.individual("0.0").key) is None  # no verdict stored for the kernel cut
        assert summarise(store, store.latest_checkpoint()).evaluations_cut == 1  # summary.json, the bench's row
    finally:
        service.close()
        store.close()
        sandbox.spares = spares


def test_a_ray_actor_kills_its_running_evaluation_at_the_drivers_cut(tmp_path, monkeypatch):
    """The driver's cut (its perf_counter) travels as wall-clock time to the actor, whose evaluator kills what still
    runs then; a lost actor is no error at the cut. The actor's class without Ray (a Ray actor is this object)."""
    import tempfile
    from pathlib import Path
    from types import SimpleNamespace

    import evo.service.evaluation_ray as er
    from conftest import SCALE_SHIFT
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from fitness.settings import EvalSettings

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the actor's problem folder, inside the test's
    spec = resolve_problem(SCALE_SHIFT, size_preset="test")
    actor = er.EvaluatorActor(spec.to_dict(), Path(SCALE_SHIFT).read_text(), load_policy("triton"), "cpu_interpreter",
                              EvalSettings(trials=1, timeout_s=120), "cpu", 1)
    try:
        sent = []

        class Lost(Exception):
            pass

        def cut_at(epoch):
            sent.append(epoch)
            actor.cut_at(epoch)
            if len(sent) > 2:
                raise Lost("the actor died")

        fake_ray = SimpleNamespace(get=lambda value: value, exceptions=SimpleNamespace(RayError=Lost))
        remote = er.RemoteEvaluator.__new__(er.RemoteEvaluator)
        remote._ray, remote.actor = fake_ray, SimpleNamespace(cut_at=SimpleNamespace(remote=cut_at))
        monkeypatch.setattr(er, "time", SimpleNamespace(time=lambda: 1000.0, perf_counter=lambda: 50.0))  # stopped
        remote.cut_running_at(51.5)
        assert sent == [1001.5]  # the driver's deadline as wall-clock time
        assert actor.evaluator._cut_at == 51.5  # and as the actor's own clock (one host here)
        monkeypatch.setattr(er, "time", time)  # the clocks running again
        remote.cut_running_at(time.perf_counter() + 1.5)
        result = actor.evaluate(candidate("hang"), "child")
        assert result.status == CANCELLED, result.reason  # the 120 s timeout would say "timeout"
        remote.cut_running_at(None)  # the actor is lost meanwhile: nothing to cut, no error
        assert actor.evaluator._cut_at is None
    finally:
        actor.close()
