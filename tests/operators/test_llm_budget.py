"""What an LLM call budget buys (issue 42): a child is a unit of work that reserves its plan, code and debugger calls
before it starts, so every plan is coded and a small budget runs fewer children in flight -- and goes deeper --
instead of planning more; replays from the cache count as calls. Through litellm's real HTTP client against the
scripted server (replies chosen by the role asked: a plan, or a correct kernel of its own)."""
import json
import re
import threading

import pytest

from conftest import read_store, run_dir_of
from llm_fakes import Replies, run
from llm_server import ScriptedLLMServer
from operators.llm.client import LLMBudgetExceeded
from operators.llm.ledger import ALLOWANCE, Budget


def depth(individuals) -> int:
    by_id = {ind.id: ind for ind in individuals}

    def of(ind):
        return 0 if ind.generation == 0 or not ind.parents else 1 + of(by_id[ind.parents[0]])
    return max(of(ind) for ind in individuals)


@pytest.mark.slow
def test_twelve_calls_with_eight_in_flight_code_every_plan_and_a_tree_goes_deep(tmp_path):
    with ScriptedLLMServer(Replies()) as server:
        done = run(tmp_path, tmp_path / "cache", "llm.budget.max_calls=12", "search/strategy=tree",
                   "search.generations=4", "llm.timeout_s=30", api_base=server.url, children=8, in_flight=8)
        sent = len(server.requests)
        bodies = [body for _, _, body in server.requests]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "llm.budget.max_calls=12 carries 3 children in flight (of 8)" in done.stdout
    assert len({json.dumps(body, sort_keys=True) for body in bodies}) == len(bodies)  # no request sent twice
    ranks: dict = {}  # issue 66: each parent's children asked for its ideas 1, 2, ..., whatever their slots
    for body in bodies:
        prompt = body["messages"][1]["content"]
        if "Your role: planner." in body["messages"][0]["content"]:
            parent = re.search(r"## Parent kernel ([\d.]+) \(numbered\)", prompt)[1]
            ranks.setdefault(parent, []).append(int(re.search(r"Yours is (\d+):", prompt)[1]))
    assert max(map(len, ranks.values())) > 1 and all(sorted(found) == list(range(1, len(found) + 1))
                                                    for found in ranks.values()), ranks
    run_dir = run_dir_of(done.stdout)
    calls, individuals = read_store(run_dir, lambda store: (store.llm_calls(), store.individuals()))
    assert sent == len(calls) == 12  # the whole budget, every call recorded
    per_child: dict = {}
    for call in calls:
        per_child.setdefault(call["individual"], []).append(call["role"])
    assert all(roles == ["planner", "coder"] for roles in per_child.values()), per_child  # every plan coded
    children = [ind for ind in individuals if ind.generation > 0]
    assert len(children) >= 4 and {ind.id for ind in children} == set(per_child)  # each reached the evaluator
    assert depth(individuals) >= 2  # a child of a child: the tree went deeper than sampling can
    report = (run_dir / "report.md").read_text()  # the calls of each child, per role, where the LLM figures are
    assert "| child | initialiser | planner | coder | debugger | crossover | calls | kernel |" in report
    assert all(f"| {ind.id} | 0 | 1 | 1 | 0 | 0 | 2 | ok |" in report for ind in children), report


def test_a_child_waits_for_the_calls_children_in_flight_give_back_and_the_last_gets_what_is_left():
    budget = Budget(max_calls=10)
    needs = {"planner": 1, "coder": 1, "debugger": 2}
    first, second = budget.child(needs, 2), budget.child(needs, 2)
    a, b = first.__enter__(), second.__enter__()
    assert (a.held, b.held) == (4, 4)
    started = threading.Event()

    def third():
        with budget.child(needs, 2) as c:
            started.set()
            third.held = c.calls
    waiter = threading.Thread(target=third)
    waiter.start()
    assert not started.wait(0.5)  # 2 left, children in flight hold 8: it waits
    token = ALLOWANCE.set(a)
    for role in ("planner", "coder"):
        assert budget.reserve("m", role)
        budget.commit(0.0)
    ALLOWANCE.reset(token)
    first.__exit__(None, None, None)  # the first child used 2 of its 4: 2 go back, 4 are free
    assert started.wait(5)
    waiter.join(5)
    assert third.held == needs  # 4 free once the first child gave back its unused 2
    second.__exit__(None, None, None)
    assert budget.totals["calls"] == 2
    with budget.child(needs, 2) as last:  # 8 left, no child in flight: all of it
        assert last.calls == needs
    budget._calls = 8  # two calls left and nobody holds any: the next child gets plan and code, no debugger try
    with budget.child(needs, 2) as short:
        assert short.calls == {"planner": 1, "coder": 1}
    budget._calls = 9
    with pytest.raises(LLMBudgetExceeded, match="a child needs at least 2"):
        budget.child(needs, 2).__enter__()
    with budget.child(needs, 2, fallback={"coder": 1}) as last:  # the last call: a child coded without a plan
        assert last.calls == {"coder": 1}
    budget._calls = 10
    with pytest.raises(LLMBudgetExceeded, match="10 of 10 calls made or held, 0 left, a child needs at least 1"):
        budget.child(needs, 2, fallback={"coder": 1}).__enter__()


@pytest.mark.slow
def test_a_sampling_run_sends_no_two_requests_alike_and_spends_its_last_call(tmp_path):
    """Issue 66: sampling's children of the seed, told the same plan, still send distinct requests (the planner's
    attempt number, the coder's seed: the cache key's sample); 7 calls make three planned children and a last one
    coded without a plan, none left stranded."""
    with ScriptedLLMServer(Replies()) as server:
        done = run(tmp_path, tmp_path / "cache", "llm.budget.max_calls=7", "search/strategy=sampling",
                   "search.generations=4", "llm.timeout_s=30", api_base=server.url, children=4, in_flight=4)
        bodies = [body for _, _, body in server.requests]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(bodies) == 7 and len({json.dumps(body, sort_keys=True) for body in bodies}) == 7
    coders = [body for body in bodies if "Your role: coder." in body["messages"][0]["content"]]
    assert len({body["messages"][1]["content"] for body in coders}) < len(coders)  # same prompt, another seed
    planners = [body["messages"][1]["content"] for body in bodies if "Your role: planner." in
                body["messages"][0]["content"]]
    assert all(f"this is attempt {k}." in planner for k, planner in enumerate(planners, start=1)), planners
    assert "7 of 7 calls made or held, 0 left, a child needs at least 1" in done.stdout
    calls = read_store(run_dir_of(done.stdout), lambda store: store.llm_calls())
    per_child: dict = {}
    for call in calls:
        per_child.setdefault(call["individual"], []).append(call["role"])
    assert sorted(per_child.values()) == [["coder"]] + [["planner", "coder"]] * 3, per_child


def test_a_planners_retries_never_take_the_coders_call():
    budget = Budget(max_calls=4)
    with budget.child({"planner": 1, "coder": 1, "debugger": 1}, 2) as allowance:
        assert budget.reserve("m", "planner") and budget.reserve("m", "planner")  # a retry: the debugger's try
        with pytest.raises(LLMBudgetExceeded):  # the one free call taken, then none: never the coder's
            budget.reserve("m", "planner"), budget.reserve("m", "planner")
        assert allowance.left("coder") == 1 and budget.reserve("m", "coder")


def test_the_start_line_says_how_many_calls_can_be_in_flight_and_what_bounds_them():
    from evo.runs.run import calls_in_flight_line

    assert calls_in_flight_line(4, 8).startswith("at most 4 LLM calls in flight (llm.concurrency=4)")
    assert calls_in_flight_line(16, 8).startswith("at most 8 LLM calls in flight (one per child of the 8 in flight, "
                                                  "fewer than llm.concurrency=16)")
