"""The steady-state search against fakes (no worker, no kernel): children start as slots free, are folded in order,
every stop reason, dedupe, migration, checkpoint and resume, and the same lineage whatever the number in flight."""
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from evo.evolution.loop import LoopPieces, steady_state, window_start
from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings
from evo.records.store import RunStore
from kernelevo.core.genome import Genome
from operators.base import CURRENT_CHILD
from fakes import CALLS, SOURCE, Cross, FakeTuner, Step, lineage
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure.verdict_text import brief


# the loop alone --------------------------------------------------------------------------------------------------
class Children:
    """Loop pieces over fake children that take `delays[n]` seconds; records starts, folds and the state folded."""

    def __init__(self, delays, ended_after=None, spent_after=None):
        self.delays, self.ended_after, self.spent_after = delays, ended_after, spent_after
        self.pool = ThreadPoolExecutor(8)
        self.started, self.folded, self.seen_at_start = [], [], {}
        self.lock = threading.Lock()

    def start(self, n):
        with self.lock:
            self.started.append(n)
            self.seen_at_start[n] = len(self.folded)
        return self.pool.submit(lambda: (time.sleep(self.delays[n]), n)[1])

    def fold(self, n, result):
        assert result == n
        self.folded.append(n)

    def ended(self, n):
        return "done" if n >= len(self.delays) or (self.ended_after is not None and n >= self.ended_after) else ""

    def spent(self):
        return "spent" if self.spent_after is not None and len(self.started) >= self.spent_after else ""

    def pieces(self):
        return LoopPieces(self.start, self.fold, self.ended, self.spent)


def test_a_slow_child_holds_back_no_start_but_the_ones_its_window_bounds():
    delays = [0.6] + [0.01] * 11
    children = Children(delays)
    assert steady_state(children.pieces(), 0, in_flight=3, staleness=4) == "done"
    assert children.folded == list(range(12))  # folded in order, whatever finished first
    assert children.seen_at_start[3] == 0  # child 3 started while child 0 ran: no generation barrier ...
    assert all(children.seen_at_start[n] >= window_start(n, 4) for n in range(12))  # ... but none out-ran its window
    assert max(children.started.index(n) for n in range(4)) < children.started.index(4)


def test_one_in_flight_runs_children_one_after_the_other():
    children = Children([0.05] * 5)  # each still running when the loop looks for a free slot
    steady_state(children.pieces(), 0, in_flight=1, staleness=3)
    assert children.folded == list(range(5)) and all(children.seen_at_start[n] == n for n in range(5))


def test_an_end_found_when_folding_drops_the_children_started_after_it():
    children = Children([0.05, 0.0, 0.0, 0.0, 0.0, 0.0], ended_after=2)
    children.ended = lambda n: "patience" if n >= 2 and len(children.folded) >= 2 else ""  # known only once folded
    assert steady_state(children.pieces(), 0, in_flight=4, staleness=4) == "patience"
    assert children.folded == [0, 1] and len(children.started) >= 3  # 2 and 3 ran, but were dropped


def test_a_spent_resource_starts_nothing_more_but_folds_what_runs():
    children = Children([0.05] * 10, spent_after=5)
    assert steady_state(children.pieces(), 0, in_flight=3, staleness=6) == "spent"
    assert children.folded == list(range(5)) == sorted(children.started)


def test_a_resumed_loop_starts_after_what_was_folded():
    children = Children([0.0] * 6)
    steady_state(children.pieces(), 4, in_flight=2, staleness=2)
    assert children.started == [4, 5] and children.folded == [4, 5]
    with pytest.raises(ValueError, match="at least 1"):
        steady_state(children.pieces(), 0, in_flight=0, staleness=2)


# the search over fakes -------------------------------------------------------------------------------------------
def search(tmp_path, in_flight=4, operators=None, tuner=None, **budget):
    store = RunStore(tmp_path)
    budget = {"generations": 4, "patience": None, **budget}
    settings = SearchSettings(mu=3, lambda_=4, parallel=in_flight, islands=budget.pop("islands", 1),
                              migration_interval=1, budget=Budget(**budget))
    seeds = [(Genome.from_source(SOURCE.format(v=0)), "seed")]
    return Search(seeds, operators or [Step(), Cross(weight=0.5)], tuner or FakeTuner(store), store, settings), store


def test_generation_zero_says_each_seed_as_it_is_tuned_with_its_verdict(tmp_path, caplog):
    s, store = search(tmp_path, generations=0)
    s.seeds = [*s.seeds, (Genome.from_source(SOURCE.format(v=3)), "inductor")]
    with caplog.at_level(logging.INFO, logger="kernelevo.evo.evolution.search"):
        s.run()
    said = sorted(r.getMessage() for r in caplog.records if r.name == "kernelevo.evo.evolution.search")
    assert said == ["generation 0: seed 1 of 2 (seed) tuned over 2 trial(s): ok, 1.000 s",
                    "generation 0: seed 2 of 2 (inductor) tuned over 2 trial(s): ok, 250.000 ms"]
    store.close()


def test_a_verdict_in_one_line_is_its_time_or_its_status_and_reasons_first_line():
    assert brief(EvalResult("ok", time_s=2e-3, timer="interpreter")) == "ok, 2.000 ms (interpreter wall-clock)"
    failed = EvalResult("compile_error", reason="InterpreterError: AttributeError('x')\nTraceback ...\n" + "y" * 300)
    assert brief(failed) == "compile_error: InterpreterError: AttributeError('x')"
    assert brief(EvalResult("timeout", reason="z" * 300)) == "timeout: " + "z" * 157 + "..."
    assert brief(EvalResult("incorrect")) == "incorrect"


def test_the_same_lineage_with_one_or_four_children_in_flight(tmp_path):
    runs = []
    for in_flight, seed in ((1, 1), (4, 2), (8, 3)):  # different completion orders too
        s, store = search(tmp_path / str(in_flight), in_flight=in_flight,
                          tuner=None)
        s.tuner = FakeTuner(store, jitter=0.02, seed=seed)
        s.service = s.tuner.service
        state = s.run()
        runs.append((lineage(store), state["hall_of_fame"], state["stop_reason"]))
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0][0]) == 1 + 4 * 4 and runs[0][2] == "4 generations done"


class Waits(Step):
    """Child 1.0 waits for its operator (as on an LLM call) until a child after it has been tuned."""
    later_tuned, waited = threading.Event(), []

    def __call__(self, parents, rng, context):
        if CURRENT_CHILD.get().id == "1.0":
            context.reserved()  # as an LLM operator, once its calls are reserved
            self.waited.append(self.later_tuned.wait(timeout=20))
        return super().__call__(parents, rng, context)


class TellsLater(FakeTuner):
    def tune(self, individual):
        tuned = super().tune(individual)
        if individual.generation > 0 and individual.id != "1.0":
            Waits.later_tuned.set()
        return tuned


def test_a_child_waiting_on_its_operator_holds_up_no_evaluation_of_the_children_after_it(tmp_path):
    whole, whole_store = search(tmp_path / "whole", generations=2)
    whole.run()
    s, store = search(tmp_path / "waits", generations=2, operators=[Waits(), Cross(weight=0.5)])
    s.tuner = TellsLater(store)
    s.service = s.tuner.service
    s.run()
    assert Waits.waited == [True]  # 1.1 was tuned while 1.0 still waited: not after 1.0 had decided
    assert lineage(store) == lineage(whole_store)  # and the lineage is the one of a search that never waited


def test_no_two_children_are_the_same_kernel(tmp_path):
    s, store = search(tmp_path, generations=6)
    s.run()
    made = [ind for ind in store.individuals() if ind.generation > 0]
    varied = [ind.genome.with_params({"W": 0}).key for ind in made]
    assert len(varied) == len(set(varied))  # every child a kernel no child before it made


def test_patience_stops_the_search_the_same_way_whatever_ran_ahead(tmp_path):
    results = []
    for in_flight in (1, 6):
        store = RunStore(tmp_path / str(in_flight))
        tuner = FakeTuner(store, flat=True)
        s, _ = search(tmp_path / str(in_flight), in_flight=in_flight, tuner=tuner, generations=20, patience=2)
        s.store = tuner.store = tuner.service.store = store
        state = s.run()
        results.append((state["stop_reason"], state["generation"], lineage(store)))
    assert results[0] == results[1]
    assert results[0][0] == "no improvement for 2 generations" and results[0][1] == 2


def test_a_spent_wall_time_or_evaluation_budget_starts_no_child(tmp_path):
    s, store = search(tmp_path / "e", generations=50, max_evaluations=10)
    state = s.run()
    assert state["stop_reason"] == "evaluation budget of 10 spent"
    assert 10 <= store.evaluation_count() < 10 + 2 * 4  # the children in flight finished, nothing more began
    s, store = search(tmp_path / "w", generations=10_000, wall_time_s=0.3)
    state = s.run()
    assert state["stop_reason"] == "wall-time budget of 0.3 s spent"  # not its 10,000 generations
    assert s.service.cut is None  # the deadline was handed to the service, and taken back at the end


def test_an_operator_budget_stops_the_search(tmp_path):
    CALLS.clear()
    s, store = search(tmp_path, operators=[Step(budget=5)], generations=50)
    state = s.run()
    assert state["stop_reason"] == "operator budget spent: fake operator budget of calls"
    assert len(store.individuals()) <= 1 + 5


def test_islands_migrate_their_best(tmp_path):
    s, store = search(tmp_path, islands=2, generations=3)
    state = s.run()
    times = {ind.id: ind.time_s for ind in store.individuals()}
    best = min((i for island in state["islands"] for i in island), key=times.get)
    assert all(best in island for island in state["islands"])
    assert {ind.id.split(".")[1] for ind in store.individuals() if ind.generation == 1} == set(map(str, range(8)))


def test_a_killed_search_resumes_to_the_lineage_of_one_never_killed(tmp_path):
    whole, whole_store = search(tmp_path / "whole", generations=5)
    whole.run()
    s, store = search(tmp_path / "killed", generations=5, tuner=None)
    s.tuner = FakeTuner(store, crash_at=11)
    s.service = s.tuner.service
    with pytest.raises(KeyboardInterrupt):
        s.run()
    checkpoint = store.latest_checkpoint()
    assert 0 < checkpoint.children < 20
    store.close()
    resumed, store = search(tmp_path / "killed", generations=5)
    state = resumed.run()
    assert lineage(store) == lineage(whole_store) and state["stop_reason"] == "5 generations done"


def test_a_wall_time_stop_mid_generation_is_checkpointed_and_resumed(tmp_path):
    s, store = search(tmp_path, in_flight=1, generations=3, tuner=None)  # one at a time: a known stop
    s.tuner = FakeTuner(store, jitter=0.0)
    s.service = s.tuner.service
    s.settings.budget.max_evaluations = 2 + 2 * 6  # seed, then six children: mid-generation 2
    state = s.run()
    assert state["children"] % 4 != 0 and store.latest_checkpoint().children == state["children"]
    store.close()
    again, store = search(tmp_path, generations=3)
    state = again.run()
    assert state["children"] == 12 and state["stop_reason"] == "3 generations done"
    whole, whole_store = search(tmp_path / "whole", generations=3)
    whole.run()
    assert lineage(store) == lineage(whole_store)
    assert math.isfinite(state["best_s"])


def test_what_a_resume_says_of_patience_is_what_the_search_does(tmp_path):
    """`kernelevo resume` refuses budgets that would run nothing and notes when patience ends a run before its
    generations (kernelevo.resuming): its reading of a checkpoint must be the search's own."""
    from evo.settings import Budget
    from kernelevo.resuming import patience_note, stops_at_once

    per = 4  # children per generation of search()

    store = RunStore(tmp_path)
    s, _ = search(tmp_path, tuner=FakeTuner(store, flat=True), generations=20, patience=2)
    s.store = s.tuner.service.store = store
    assert s.run()["stop_reason"] == "no improvement for 2 generations"
    checkpoint, made = store.latest_checkpoint(), len(store.individuals())
    said = stops_at_once(Budget(generations=30, patience=2), per, checkpoint, store)
    assert said == ["search.patience=2 stops it at once: no improvement in its last 2 generations (lift it: "
                    "search.patience=null, or a value above 2)"]
    store.close()
    again, store = search(tmp_path, tuner=None, generations=30, patience=2)
    again.tuner = FakeTuner(store, flat=True)
    again.service = again.tuner.service
    assert again.run()["stop_reason"] == "no improvement for 2 generations" and len(store.individuals()) == made
    assert stops_at_once(Budget(generations=30, patience=4), per, checkpoint, store) == []
    assert patience_note(Budget(generations=30, patience=4), checkpoint) == (
        "note: search.patience=4 ends it after 2 more generations without improvement (its last 2 "
        "generations brought none), before search.generations=30 would; search.patience=null lifts it")
    store.close()
    lifted, store = search(tmp_path, tuner=None, generations=30, patience=4)
    lifted.tuner = FakeTuner(store, flat=True)
    lifted.service = lifted.tuner.service
    state = lifted.run()
    assert state["stop_reason"] == "no improvement for 4 generations" and state["generation"] == 4  # 2 more, as noted
    assert stops_at_once(Budget(generations=4, patience=None), per, store.latest_checkpoint(), store) == [
        "its 4 generations are done (search.generations above 4 extends it)"]
