"""The LLM client's retries (tenacity, ``operators/llm/retries.py``) and its pace (``llm.max_calls_per_minute``),
through litellm's real HTTP path against the scripted server on 127.0.0.1: what is retried, how long a retry waits
(a server's Retry-After, the cap), what cuts a wait short, and the one log line per retry.

The waits are read where the client asks for them (its ``_sleep``, wrapped), never timed."""
import ast
import email.utils
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from kernelevo.core.errors import KernelevoError
from llm_fakes import MODEL, ask, ok, settings
from llm_fakes import api_key, litellm_loaded  # noqa: F401 (the fixtures)
from llm_server import ScriptedLLMServer
from operators.llm.client import LLMClient, LLMCut, LLMError, LLMSettings
from operators.llm.diagnosis import retry_after_s


def recording(client: LLMClient, events: list, entered: threading.Event | None = None) -> LLMClient:
    """`client` with every wait it asks for appended to `events` as ("wait", seconds) (`entered` set then)."""
    real = client._sleep

    def sleep(seconds, model):
        events.append(("wait", seconds))
        if entered is not None:
            entered.set()
        return real(seconds, model)

    client._sleep = sleep
    return client


def scripted(entries: list, events: list):
    """A server script answering `entries` in turn, each request appended to `events` as "request"."""
    def script(body):
        events.append("request")
        return entries.pop(0) if entries else {"status": 500, "message": "script exhausted"}
    return script


def retries_logged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]


def test_a_rate_limits_retry_after_is_the_wait_before_the_next_request(caplog):
    events = []
    entries = [{"status": 429, "headers": {"Retry-After": "1"}}, ok("after the wait")]
    with ScriptedLLMServer(scripted(entries, events)) as server:
        client = recording(LLMClient(settings(server.url, backoff_s=30)), events)  # backoff alone would wait 30 s+
        reply = client.complete(ask(), role="coder")
    assert reply.text == "after the wait"
    assert events == ["request", ("wait", 1.0), "request"]
    [line] = retries_logged(caplog)
    assert "retrying in 1.00s (the server's Retry-After)" in line and "attempt 1/4" in line and "HTTP 429" in line


def test_a_retry_after_beyond_the_cap_waits_the_cap_and_backoff_has_jitter_under_it(caplog):
    events = []
    entries = [{"status": 429, "headers": {"Retry-After": "3600"}}, {"status": 503}, ok("third")]
    with ScriptedLLMServer(scripted(entries, events)) as server:
        client = recording(LLMClient(settings(server.url, backoff_s=0.05, backoff_max_s=0.2)), events)
        assert client.complete(ask(), role="coder").text == "third"
    capped, backoff = retries_logged(caplog)
    assert "retrying in 0.20s (the server's Retry-After of 3600s, capped at llm.backoff_max_s)" in capped
    assert "attempt 2/4" in backoff and "HTTP 503" in backoff and "Retry-After" not in backoff
    assert events[:3] == ["request", ("wait", 0.2), "request"] and events[4] == "request"
    waited = events[3][1]  # the 503's: backoff_s * 2 (the second retry) plus up to backoff_s of jitter, capped
    assert events[3][0] == "wait" and 0.1 <= waited <= 0.15


def test_a_refused_key_is_not_retried_and_says_so(caplog):
    events = []
    entries = [{"status": 401, "message": "Incorrect API key provided"}, ok("never sent")]
    with ScriptedLLMServer(scripted(entries, events)) as server:
        client = recording(LLMClient(settings(server.url, max_retries=3)), events)
        with pytest.raises(LLMError) as info:
            client.complete(ask(), role="coder")
        url = server.url
    assert events == ["request"] and retries_logged(caplog) == []
    message = str(info.value)
    assert info.value.kind == "auth" and info.value.status == 401
    assert message.startswith(f"LLM call to {MODEL} at {url} failed after 1 attempt(s): HTTP 401")
    assert "Incorrect API key provided" in message


def test_a_deadline_set_while_a_retry_waits_cuts_the_wait_and_is_no_failure():
    events, entered = [], threading.Event()
    entries = [{"status": 429, "headers": {"Retry-After": "30"}}, ok("never sent")]
    with ScriptedLLMServer(scripted(entries, events)) as server:
        client = recording(LLMClient(settings(server.url, max_consecutive_failures=1)), events, entered)
        raised = []

        def call():
            with pytest.raises(LLMCut):
                client.complete(ask(), role="coder")
            raised.append("cut")

        thread = threading.Thread(target=call)
        waited_out = threading.Timer(30, lambda: None)  # ends when the 30 s wait would
        waited_out.start()
        thread.start()
        assert entered.wait(20)  # waiting to retry, no deadline yet
        client.cut_at(time.perf_counter())  # set while it waits
        thread.join(timeout=60)
        cut_short = waited_out.is_alive()
        waited_out.cancel()
    assert raised == ["cut"] and cut_short and events == ["request", ("wait", 30.0)]
    assert not client.failures.down.is_set() and client.totals["calls"] == 0  # no failure; its call given back


def test_the_probe_is_one_attempt():
    events = []
    with ScriptedLLMServer(scripted([{"status": 503}, ok("never sent")], events)) as server:
        client = recording(LLMClient(settings(server.url, max_retries=3)), events)
        with pytest.raises(LLMError, match=r"after 1 attempt\(s\)"):
            client.probe()
    assert events == ["request"]


def test_max_calls_per_minute_spaces_the_requests_and_the_deadline_cuts_a_wait_for_a_turn():
    events = []
    with ScriptedLLMServer(scripted([ok("first"), ok("never sent")], events)) as server:
        client = recording(LLMClient(settings(server.url, max_calls_per_minute=1)), events)
        assert client.complete(ask("one"), role="coder").text == "first"
        client.cut_at(time.perf_counter() + 0.5)
        with pytest.raises(LLMCut):
            client.complete(ask("two"), role="coder")  # its turn is a minute after the first request's
    assert events[:2] == [("wait", 0.0), "request"] and len(events) == 3
    assert events[2][0] == "wait" and 30 < events[2][1] <= 60  # 60 s after the first, less the first call's time
    assert not client.failures.down.is_set()


def test_without_max_calls_per_minute_requests_wait_for_nothing():
    events = []
    with ScriptedLLMServer(scripted([ok("a"), ok("b")], events)) as server:
        client = recording(LLMClient(settings(server.url)), events)
        client.complete(ask("a"), role="coder")
        client.complete(ask("b"), role="coder")
    assert events == ["request", "request"]


def response_with(headers: dict) -> SimpleNamespace:
    return SimpleNamespace(response=httpx.Response(429, headers=headers))


@pytest.mark.parametrize("headers, seconds", [
    ({"Retry-After": "2"}, 2.0), ({"retry-after": "1.5"}, 1.5), ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
    ({"Retry-After": "soon"}, None), ({"Retry-After": "-3"}, None), ({}, None)])
def test_retry_after_reads_seconds_milliseconds_or_nothing(headers, seconds):
    assert retry_after_s(response_with(headers)) == seconds


def test_retry_after_reads_an_http_date_and_a_past_one_is_no_wait():
    ahead = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after_s(response_with({"Retry-After": ahead})) <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert retry_after_s(response_with({"Retry-After": past})) == 0.0
    assert retry_after_s(ValueError("no response")) is None and retry_after_s(None) is None


@pytest.mark.parametrize("field, value", [("max_calls_per_minute", 0), ("backoff_max_s", -1), ("backoff_s", -0.5)])
def test_bad_retry_settings_are_named(field, value):
    with pytest.raises(KernelevoError, match=f"llm.{field}"):
        LLMSettings(model=MODEL, **{field: value})


def test_no_module_imports_litellm_or_tenacity_at_its_top():
    """An offline run makes no LLM call, so neither is imported unless one is made: the GPU machines' wheels and a
    user's install without them still run the offline search (litellm's import also costs seconds)."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in (p for package in ("kernelevo", "evo", "fitness", "operators", "hardware_profiles")
                 for p in (root / package).rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # module level only: a function's import runs when called
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(root)}: {n}" for n in names if n.split(".")[0] in {"litellm", "tenacity"}]
    assert found == []
