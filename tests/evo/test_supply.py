"""Supply that follows the GPUs: a search on N evaluators makes N x lambda_ children a generation, keeps N times as
many in flight and tunes its seeds N times as many trials at once; its lineage is then a function of config, seed,
measurements and N (the same whatever the finishing order), and a resumed run keeps the N it started with."""
import threading
import time
from concurrent.futures import Future

import pytest

from evo.records.meta import SUPPLY_EVALUATORS
from evo.runs.run import supplied
from evo.runs.seeding import Seed, ieee_where_tf32_fails
from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings
from evo.records.store import RunStore
from evo.tuning.tuner import Tuner
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from kernelevo.core.evaluation_record import EvalResult
from fakes import SOURCE, TUNER_SEED, Cross, FakeService, FakeTuner, LandscapeService, Step, lineage


def test_lambda_is_per_evaluator_unless_asked_otherwise():
    one = SearchSettings(mu=4, lambda_=8)
    four = one.on_evaluators(4)
    assert (one.per_generation, one.children_in_flight, one.window, one.seed_batch(3, 6)) == (8, 8, 8, 3)
    assert (four.per_generation, four.children_in_flight, four.window) == (32, 32, 32)
    # a seed's trials and its batch are the tuner's per evaluator: generation 0 in as many rounds as on one
    assert (one.seed_trials(6), four.seed_trials(6), four.seed_batch(3, 6), four.seed_batch(3, 20)) == (6, 24, 12, 12)
    assert four.seed_batch(8, 1) == 4  # at most every one of the seed's trials
    fixed = SearchSettings(mu=4, lambda_=8, lambda_per_gpu=False).on_evaluators(4)
    assert (fixed.per_generation, fixed.children_in_flight, fixed.seed_trials(6), fixed.seed_batch(3, 6)) == \
        (8, 8, 6, 3)
    assert SearchSettings(lambda_=8, islands=2, parallel=5).on_evaluators(4).children_in_flight == 5  # as set
    with pytest.raises(ValueError, match="at least one evaluator"):
        one.on_evaluators(0)


class CountingTuner(FakeTuner):
    """FakeTuner that records the most individuals it tuned at once."""

    def __init__(self, store, **kw):
        super().__init__(store, **kw)
        self.now = self.most = 0

    def tune(self, individual):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.02)
            return super().tune(individual)
        finally:
            with self.lock:
                self.now -= 1


def run(tmp_path, evaluators: int, seed: int):
    store = RunStore(tmp_path)
    settings = SearchSettings(mu=3, lambda_=2, budget=Budget(generations=3, patience=None)).on_evaluators(evaluators)
    tuner = CountingTuner(store, jitter=0.03, seed=seed)
    search = Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [Step(), Cross(weight=0.5)], tuner, store,
                    settings)
    state = search.run()
    return lineage(store), state["hall_of_fame"], tuner.most


def test_four_evaluators_keep_four_times_the_children_in_flight_with_one_lineage_whatever_the_order(tmp_path):
    one = run(tmp_path / "one", 1, seed=1)
    first, second = run(tmp_path / "a", 4, seed=2), run(tmp_path / "b", 4, seed=3)  # other finishing orders
    assert first[:2] == second[:2]  # the lineage: config, seed, measurements and the evaluator count
    slots = [{int(i.split(".")[1]) for i, *_ in lin if i.startswith("1.")} for lin in (one[0], first[0])]
    assert max(slots[0]) <= 1 and 4 <= max(slots[1]) <= 7  # a generation: lambda_ (2) per evaluator
    assert {i.split(".")[0] for i, *_ in first[0]} == {"0", "1", "2", "3"}  # the same 3 generations
    assert one[2] <= 2 < first[2] <= 8  # children in flight: lambda_ x evaluators


class InFlight(LandscapeService):
    """Records the most evaluations in flight at once (each takes 0.1 s)."""

    def __init__(self):
        super().__init__(delay=lambda n: 0.1)
        self.now = self.most = 0
        self.guard = threading.Lock()

    def submit(self, source, label=""):
        with self.guard:
            self.now += 1
            self.most = max(self.most, self.now)
        future = super().submit(source, label)
        done = Future()

        def finished(f):
            with self.guard:
                self.now -= 1
            done.set_result(f.result())

        future.add_done_callback(finished)
        return done


def test_a_seed_is_tuned_with_the_larger_batch_and_a_child_with_the_tuners_own():
    seed_service, child_service = InFlight(), InFlight()
    tuned = Tuner(seed_service, None, trials=6, parallel=3, seed_parallel=6).tune(Individual("0.0", TUNER_SEED))
    assert tuned.ok and seed_service.most == 6
    child = Individual("1.0", TUNER_SEED.with_params({"NUM_WARPS": 2}), parents=("0.0",), operator="param_mutation",
                       generation=1)
    assert Tuner(child_service, None, trials=6, parallel=3, seed_parallel=6).tune(child).ok
    assert 1 <= child_service.most <= 3  # (a configuration beyond the profile's limits is skipped, not evaluated)


def test_a_seed_on_four_evaluators_is_tuned_four_times_the_trials_in_as_many_rounds():
    service = InFlight()
    tuned = Tuner(service, None, trials=6, parallel=3, seed_trials=24, seed_parallel=12).tune(Individual("0.0", TUNER_SEED))
    trials = tuned.tuning["trials"]
    assert len(trials) == tuned.trials == 24  # two rounds of 12, as one GPU's two of 3 (a configuration beyond the
    assert 6 < service.most <= 12  # profile's limits is skipped, not evaluated)
    assert len(service.evaluated) == sum(1 for t in trials if "skipped" not in t.get("note", ""))


def test_a_resumed_run_keeps_the_evaluator_count_it_started_with(tmp_path, capsys):
    store = RunStore(tmp_path)
    settings = SearchSettings(lambda_=8)
    assert supplied(settings, store, 4).per_generation == 32 and store.get_meta(SUPPLY_EVALUATORS) == 4
    resumed = supplied(settings, store, 1)  # resumed on one GPU: the lineage it began goes on
    assert resumed.per_generation == 32 and "started on 4 evaluators and resumes on 1" in capsys.readouterr().out
    store.close()


class Precision:
    """Judges a source with TF32 dots incorrect and one with IEEE dots correct, each after 0.1 s; records the most
    judged at once."""

    def __init__(self):
        self.now = self.most = 0
        self.guard = threading.Lock()

    def submit(self, source, label=""):
        with self.guard:
            self.now += 1
            self.most = max(self.most, self.now)
        done = Future()

        def judge():
            time.sleep(0.1)
            with self.guard:
                self.now -= 1
            done.set_result(("key", EvalResult(status="incorrect" if "tf32" in source else "ok", time_s=1e-3)))

        threading.Thread(target=judge).start()
        return done


def test_compiler_seeds_are_judged_for_their_tf32_dots_at_once_not_one_after_another(capsys):
    seeds = [Seed.from_source(f"V = {v}\nc = tl.dot(a, b, input_precision='tf32')\n", f"inductor:{v}")
             for v in range(3)] + [Seed.from_source("V = 9\n", "inductor:plain")]
    service = Precision()
    kept = ieee_where_tf32_fails(service, seeds)
    assert service.most == 3  # the three with TF32 dots judged together, then their three rewrites together
    assert [s.made_by for s in kept] == ["inductor:0", "inductor:1", "inductor:2", "inductor:plain"]
    assert all("ieee" in s.genome.source for s in kept[:3]) and kept[3] == seeds[3]
    lines = [line for line in capsys.readouterr().out.splitlines() if "IEEE fp32" in line]
    assert [line.split("'")[0] for line in lines] == [f"[kernelevo] inductor:{v}" for v in range(3)]
