"""The strategies experiment (experiment=strategies): its table and page from the run stores, and its record/replay,
over fakes: a fake evaluator behind the real evaluation service and tuner, the real LLM mutation and client against
the scripted server (replies chosen by what was asked: faster, slower, wrong, unusable). The replay answers every
evaluation from the recorded run stores (fitness/backend=replay) and every LLM request from the cache, no server."""
import hashlib
import json
import statistics
import threading
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace

import pytest

from kernelevo.core.errors import KernelevoError
from evo.service.evaluation import EvaluationService
from evo.reports.anytime import Step
from evo.reports.outcome import SUMMARY_FILE, RunOutcome, summarise
from evo.runs.run import _record_llm_call as record_llm_call
from evo.service.replay import RecordedEvaluator, RecordedEvaluators, ReplayMiss
from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings
from evo.records.store import RunStore
from evo.benchmark.strategies_report import run_record, within, write_strategies_report
from evo.tuning.tuner import Tuner
from kernelevo.core.genome import Genome
from kernelevo.core.individual import LAUNCHES
from llm_server import ScriptedLLMServer
from operators.base import CURRENT_CHILD
from operators.llm.client import LLMClient
from operators.llm.operators import LLMMutation
from operators.llm.parsing import ParseError
from fakes import SOURCE, FakeEvaluator, toy_verdict, value
from llm_fakes import IN_PRICE, OUT_PRICE, ask, ok, settings
from llm_fakes import api_key  # noqa: F401 (the fixture)

STRATEGIES = ("sampling", "refinement", "evolution", "tree")
TARGETS = {name: f"evo.evolution.strategy.{name.capitalize()}" for name in STRATEGIES}


def replies(body):
    """Faster, slower, wrong (incorrect when measured) or unusable, chosen by the request's text."""
    text = body["messages"][-1]["content"]
    v, digest = int(text.rsplit("= ", 1)[1]), int(hashlib.sha256(text.encode()).hexdigest(), 16)
    pick, step = digest % 4, 1 + (digest // 4) % 5
    if pick == 3:
        return ok("I cannot help with that (")
    made = (v + step, v - step, v + step + (4 - (v + step) % 5))[pick]  # the last one incorrect
    return ok(SOURCE.format(v=made), prompt_tokens=100, completion_tokens=40)


class Team:
    """The LLM team's coder through the real client, told which child asks (so replies follow the request)."""

    def __init__(self, client):
        self.client, self.asked, self.lock = client, Counter(), threading.Lock()
        self.context = SimpleNamespace(baked=lambda individuals: frozenset())  # no kernel holds test sizes

    def code(self, parent, plan):
        child = CURRENT_CHILD.get().id
        with self.lock:  # the child's how-many-th request: a new one for each of its attempts, as the real team's
            self.asked[child] += 1
        prompt = f"child {child} try {self.asked[child]}: improve V = {value(parent.genome)}"
        text = self.client.complete(ask(prompt), role="coder").text
        try:
            Genome.from_source(text)
        except SyntaxError as exc:  # the real team's parser refuses it too: no child
            raise ParseError("code", f"not Python: {exc}") from exc
        return text


def on_gpu(source: str):
    """The toy's verdict as if timed on a GPU: only GPU times give speed-ups."""
    return replace(toy_verdict(source), timer="cuda-events")


def experiment(sweep, url, cache, record=None, in_flight=1, budget=None, strategies=STRATEGIES, verdict=toy_verdict):
    """One run per strategy and seed, as the experiment's multirun makes them, into sweep/<n>-toy; `verdict`: the
    toy's judge (on the interpreter, unless told otherwise)."""
    budget = budget or {"max_evaluations": 10}
    for n, (strategy, seed) in enumerate((s, seed) for s in strategies for seed in (0, 1)):
        run_dir = sweep / f"{n}-toy"
        store = RunStore(run_dir)
        store.set_meta("config", {"problem": {"name": "toy"}, "llm": {"input_cost_per_token": IN_PRICE,
                                                                      "output_cost_per_token": OUT_PRICE},
                                  "search": {"seed": seed, "strategy": {"_target_": TARGETS[strategy]}, **budget}})
        evaluator = FakeEvaluator(verdict) if record is None else \
            RecordedEvaluator(FakeEvaluator(verdict), RunStore(RecordedEvaluators(record).recorded_run(run_dir), False))
        service = EvaluationService([evaluator], store, 2)
        tuner = Tuner(service, None, trials=2, seed=seed, parallel=2, store=store)
        from hydra.utils import get_class

        client = LLMClient(settings(url, cache_dir=str(cache), max_retries=0),
                           recorder=lambda call, store=store: record_llm_call(store, call))
        search = Search([(Genome.from_source(SOURCE.format(v=1)), "seed")], [LLMMutation(debug_tries=0,
                                                                                          use_planner=False)],
                        tuner, store, SearchSettings(mu=2, lambda_=2, seed=seed, parallel=in_flight, budget=Budget(
                            generations=6, patience=None, **{k: v for k, v in budget.items() if k != "llm"})),
                        team=Team(client), strategy=get_class(TARGETS[strategy])())
        search.run()
        tuner.close()
        service.close()
        summarise(store, store.latest_checkpoint()).write(run_dir)  # the run's outcome, as evo.runs.run writes it
        store.close()
    return write_strategies_report(sweep)


def test_the_experiment_replays_to_the_same_table_with_no_server(tmp_path):
    cache = tmp_path / "cache"
    with ScriptedLLMServer(replies) as server:
        experiment(tmp_path / "record", server.url, cache, verdict=on_gpu)
        asked = len(server.requests)
        url = server.url
    table = json.loads((tmp_path / "record" / "strategies.json").read_text())
    assert asked > 8 and [row["strategy"] for row in table["rows"]] == list(STRATEGIES)
    assert 0 < sum(run["correct"] for run in table["runs"]) < sum(run["children"] for run in table["runs"])
    ends = [run["curve"]["points"][-1] for run in table["runs"]]  # some children wrong, some right
    assert all(end["evaluations"] == 10 for end in ends)  # each spent its budget, cut as the search cuts
    assert all(end["speedup_vs_seed"] > 1 and end["llm_calls"] > 0 and end["llm_cost_usd"] > 0 for end in ends)
    assert [row["llm_calls"] for row in table["rows"]] == [
        statistics.median(end["llm_calls"] for run, end in zip(table["runs"], ends) if run["strategy"] == name)
        for name in STRATEGIES]  # the table's medians over the runs' curves

    page = experiment(tmp_path / "replay", url, cache, record=tmp_path / "record", verdict=on_gpu)  # no server
    for name in ("strategies.json", "strategies.md"):
        assert (tmp_path / "replay" / name).read_text() == (tmp_path / "record" / name).read_text()
    assert page.read_text().count("<img") == 1
    replayed = RunStore(tmp_path / "replay" / "0-toy", create=False)
    assert all(call["cached"] for call in replayed.llm_calls())  # every reply from the cache
    replayed.close()


def test_a_replay_that_goes_another_way_is_an_error_naming_the_kernel(tmp_path):
    store = RunStore(tmp_path / "record")
    recorded = RecordedEvaluator(FakeEvaluator(toy_verdict), store)
    with pytest.raises(ReplayMiss, match="never measured in the record .*went another way"):
        recorded.evaluate(SOURCE.format(v=3))
    with pytest.raises(KernelevoError, match="no recorded run 7-toy"):
        RecordedEvaluators(str(tmp_path)).recorded_run(tmp_path / "7-toy")


def test_the_budget_counts_generation_0_and_each_child_begun_before_it_was_spent():
    made = [(SimpleNamespace(generation=g), Step(evaluations=n, gpu_s=n * 0.5)) for g, n in
            [(0, 3), (0, 3), (1, 2), (1, 3), (2, 1), (2, 1)]]
    assert within(made, {"evaluations": 4}) == made[:2]  # the seeds always (6 spent): then no child
    assert within(made, {"evaluations": 7}) == made[:3]  # 6 < 7 spent before the first child, 8 after it
    assert within(made, {"evaluations": 9}) == made[:4]  # 8 < 9 before the second; 11 before the third
    assert within(made, {"gpu_s": 100.0}) == made and within(made, {}) == made
    assert within(made, {"evaluations": 9, "gpu_s": 3.5}) == made[:3]  # the first limit reached cuts


def test_the_table_compares_runs_at_their_budget_and_says_when_budgets_differ(tmp_path):
    with ScriptedLLMServer(replies) as server:
        experiment(tmp_path, server.url, tmp_path / "cache", in_flight=2, budget={"max_gpu_s": 4.0},
                   strategies=("sampling", "tree"))
    runs = [run_record(d) for d in sorted(tmp_path.glob("*-toy"))]
    assert all(run.budget == {"gpu_s": 4.0} and 4.0 <= run.end["gpu_s"] < 4.0 + 2 * 0.5 for run in runs)
    assert all(run.outcome == RunOutcome.read(tmp_path / run.run) and run.problem == "toy" for run in runs)
    text = (tmp_path / "strategies.md").read_text()
    assert text.startswith("Budget per run: gpu_s 4.") and "interpreter wall-clock, not GPU figures" in text
    # issue 66: on the interpreter no speed-up, no cost per gain, no curve of them; the proxy ranking is named
    table = json.loads((tmp_path / "strategies.json").read_text())
    assert table["speedups"] is False and table["ranked_by"] == LAUNCHES
    assert f"Ranked by (parents, the tree's nodes, the best kernel): {LAUNCHES}." in text
    assert all(row[key] is None for row in table["rows"] for key in ("speedup", "calls_per_gain", "cost_per_gain",
                                                                     "runs_with_gain"))
    assert all(point["speedup_vs_seed"] is None for run in table["runs"] for point in run["curve"]["points"])
    assert "<img" not in (tmp_path / "strategies.html").read_text()
    store = RunStore(tmp_path / "0-toy", create=False)
    store.set_meta("config", {**store.get_meta("config"), "search": {"seed": 0, "max_gpu_s": 9.0}})
    store.close()
    write_strategies_report(tmp_path)
    assert "do not share one budget" in (tmp_path / "strategies.md").read_text()
    (tmp_path / "0-toy" / SUMMARY_FILE).unlink()  # a run killed before it ended: left out, and named
    write_strategies_report(tmp_path)
    table = json.loads((tmp_path / "strategies.json").read_text())
    assert table["unfinished"] == ["0-toy"] and [run["run"] for run in table["runs"]] == ["1-toy", "2-toy", "3-toy"]
    assert table["budget"] == {"gpu_s": 4.0} and "0-toy" in (tmp_path / "strategies.md").read_text()
