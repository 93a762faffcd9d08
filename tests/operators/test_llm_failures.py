"""An LLM that fails during a run, against the scripted server or a port where nothing listens: every failed call
names its cause (the provider's own message, or the refused connection litellm hides behind an HTTP 500) and its
URL; calls failed in a row take the LLM for down and stop the search at once with that cause, at a checkpoint a
resume continues from, remaking every child not folded in; the wall budget cuts requests and retries short.

The search runs over the fakes of ``test_steady_state`` (no worker, no kernel) with the real LLM mutation operator
and client: only the team's prompts are fakes.
"""
import threading
import time
from types import SimpleNamespace

import pytest

from evo.evolution.search import Search
from evo.settings import Budget, SearchSettings
from evo.records.store import RunStore
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from fakes import SOURCE, FakeTuner, value
from kernelevo.commands import llm_stop
from llm_fakes import ask, ok, refused_url, settings
from llm_fakes import api_key, litellm_loaded  # noqa: F401 (the fixtures)
from llm_server import ScriptedLLMServer
from operators.llm.client import LLMClient, LLMCut, LLMError, LLMUnavailable
from operators.llm.operators import LLMMutation




# the client ------------------------------------------------------------------------------------------------------
def test_a_refused_connection_is_named_with_its_url_not_as_an_http_500(caplog):
    url = refused_url()
    with pytest.raises(LLMError) as info:
        LLMClient(settings(url, max_retries=1)).complete(ask(), role="coder")
    message = str(info.value)
    assert info.value.kind == "connection" and f"at {url}" in message and "Connection refused" in message
    assert "500" not in message
    retry = next(r.getMessage() for r in caplog.records if "retrying" in r.getMessage())
    assert url in retry and "Connection refused" in retry and "attempt 1/2" in retry


def test_calls_failed_in_a_row_take_the_llm_for_down_and_a_reply_resets_the_count(caplog):
    refused = "Incorrect API key provided"
    script = [{"status": 401, "message": refused}, ok("fine")] + [{"status": 401, "message": refused}] * 3 + [ok()]
    with ScriptedLLMServer(script) as server:
        url = server.url
        client = LLMClient(settings(url, max_retries=0, max_consecutive_failures=3))
        for expected in (LLMError, "fine", LLMError, LLMError, LLMUnavailable, LLMUnavailable):
            if isinstance(expected, str):
                assert client.complete(ask(), role="coder").text == expected
                continue
            with pytest.raises(LLMError) as info:
                client.complete(ask(), role="coder")
            assert type(info.value) is expected
        assert len(server.requests) == 5  # once down, nothing more is sent
    message = str(info.value)
    assert message.startswith("LLM unavailable: 3 calls in a row failed") and refused in message
    assert f"at {url}" in message and "HTTP 401" in message
    assert "(1 of 3 failed calls in a row)" in caplog.text and "(3 of 3 failed calls in a row)" in caplog.text


def test_the_llm_taken_for_down_wakes_a_call_waiting_to_retry():
    def script(body):
        return {"status": 503} if body["messages"][-1]["content"] == "slow" else {"status": 401}

    with ScriptedLLMServer(script) as server:
        client = LLMClient(settings(server.url, max_retries=3, backoff_s=30, max_consecutive_failures=1))
        raised = []

        def slow():
            with pytest.raises(LLMUnavailable):
                client.complete(ask("slow"), role="coder")  # 503, then a 30 s wait before its retry
            raised.append("slow")

        thread = threading.Thread(target=slow)
        thread.start()
        while not server.requests:
            time.sleep(0.01)
        with pytest.raises(LLMUnavailable):
            client.complete(ask("fatal"), role="coder")
        thread.join(timeout=60)  # past its 30 s wait: had it not been woken, its retry would be a third request
    assert raised == ["slow"] and len(server.requests) == 2  # woken: no retry sent


def test_the_deadline_cuts_a_request_in_flight_and_a_retry_wait_and_is_no_failure():
    with ScriptedLLMServer([ok("too late", delay_s=20), {"status": 503}, ok("never sent")]) as server:
        client = LLMClient(settings(server.url, timeout_s=30, max_retries=2, backoff_s=30,
                                    max_consecutive_failures=1))
        for _ in range(2):  # a request answered after 20 s, then a 503 followed by a 30 s wait
            client.cut_at(time.perf_counter() + 0.5)
            with pytest.raises(LLMCut):  # not the reply after 20 s, not the retry after 30 s (counted below)
                client.complete(ask(f"cut {_}"), role="coder")
        with pytest.raises(LLMCut):
            client.complete(ask("after"), role="coder")  # past the deadline: not sent
        assert len(server.requests) == 2 and not client.failures.down.is_set()


# the search ------------------------------------------------------------------------------------------------------
class Team:
    """The team's face the LLM mutation sees (no planner): a coder asked through the real client, and a context that
    knows no kernel baked at test sizes."""

    def __init__(self, client):
        self.client = client
        self.context = SimpleNamespace(baked=lambda individuals: frozenset())

    def code(self, parent, plan):
        return self.client.complete(ask(f"improve V = {value(parent.genome)}"), role="coder").text


def coder(start: int):
    """A server script: each request gets the next kernel (V = start, start + 1, ...)."""
    counter = iter(range(start, 10 ** 6))
    return lambda body: ok(SOURCE.format(v=next(counter)))


def search(run_dir, client, generations=2, **budget):
    store = RunStore(run_dir)
    settings = SearchSettings(mu=2, lambda_=4, parallel=2, budget=Budget(generations=generations, patience=None,
                                                                          **budget))
    return Search([(Genome.from_source(SOURCE.format(v=0)), "seed")], [LLMMutation(use_planner=False, debug_tries=0)],
                  FakeTuner(store), store, settings, team=Team(client)), store


def test_an_llm_gone_mid_run_stops_it_at_once_naming_why_and_a_resume_loses_nothing(tmp_path):
    url = refused_url()
    s, store = search(tmp_path, LLMClient(settings(url, max_retries=0, max_consecutive_failures=3)))
    state = s.run()
    stop = state["stop_reason"]  # at once: after its third failed call, no retry (max_retries=0)
    assert stop.startswith("LLM unavailable: 3 calls in a row failed") and url in stop and "Connection refused" in stop
    assert [ind.id for ind in store.individuals()] == ["0.0"]  # no child folded in: none lost
    assert store.latest_checkpoint().children == 0
    store.close()

    with ScriptedLLMServer(coder(1)) as server:  # the LLM is back
        again, store = search(tmp_path, LLMClient(settings(server.url)))
        state = again.run()
    assert state["stop_reason"] == "2 generations done"
    made = [ind for ind in store.individuals() if ind.generation > 0]
    assert len(made) == 8 and {ind.operator for ind in made} == {"llm_mutation"}


def test_an_llms_failed_calls_and_waits_count_in_the_search_time(tmp_path):
    """Issue 44: a run that spent ~50 s on LLM retries reported "search 5.8 s": the time of its last checkpoint
    (generation 0), no child having been folded in since. The stop saves the state with the time it took."""
    with ScriptedLLMServer(lambda body: {"status": 503, "delay_s": 0.4}) as server:
        s, store = search(tmp_path, LLMClient(settings(server.url, max_retries=0, max_consecutive_failures=3)))
        state = s.run()
        failed = len(server.requests)
    assert state["stop_reason"].startswith("LLM unavailable") and store.latest_checkpoint().children == 0
    generation0 = store.latest_checkpoint().logbook[0]["elapsed_s"]
    elapsed = store.latest_checkpoint().elapsed_s
    assert failed == 3 and elapsed > generation0  # the time of its failed calls, after generation 0, counted
    store.close()


def test_the_wall_budget_stops_a_search_that_llm_calls_hold(tmp_path):
    """Was: a generation of 663 s under a wall budget of 900 s, its LLM calls waiting out time-outs and retries."""
    with ScriptedLLMServer(lambda body: {**ok(SOURCE.format(v=7)), "delay_s": 20}) as server:
        s, store = search(tmp_path, LLMClient(settings(server.url, timeout_s=60, max_retries=4, backoff_s=30)),
                          generations=100, wall_time_s=1.0)
        replied = threading.Timer(20, lambda: None)  # ends when the server's first reply would come
        replied.start()
        state = s.run()
        cut_short = replied.is_alive()
        replied.cancel()
    assert state["stop_reason"] == "wall-time budget of 1 s spent" and cut_short  # no reply waited for
    assert not s.team.client.failures.down.is_set()  # cut short, not failed


# the command's exit ----------------------------------------------------------------------------------------------
def test_a_run_its_llm_stopped_exits_1_when_no_llm_child_was_made_and_says_how_to_go_on(tmp_path, capsys):
    stop = "LLM unavailable: 3 calls in a row failed; the last: ..."
    store = RunStore(tmp_path)
    store.add_individual(Individual("0.0", Genome.from_source(SOURCE.format(v=0))))
    store.close()
    with pytest.raises(SystemExit) as info:
        llm_stop(tmp_path, stop)
    err = capsys.readouterr().err
    assert info.value.code == 1 and len(err.strip().splitlines()) == 1
    assert stop in err and "no LLM child was made" in err and f"kernelevo resume run_dir={tmp_path}" in err
    llm_stop(tmp_path, "2 generations done")  # another stop: nothing to say
    assert capsys.readouterr() == ("", "")
    store = RunStore(tmp_path)
    store.add_individual(Individual("1.0", Genome.from_source(SOURCE.format(v=1)), parents=("0.0",),
                                    operator="llm_mutation", generation=1))
    store.close()
    llm_stop(tmp_path, stop)  # an LLM child was made: a useful run, exit 0, and how to go on
    assert f"after 1 LLM children: fix it, then continue the run: kernelevo resume run_dir={tmp_path}" in \
        capsys.readouterr().out
