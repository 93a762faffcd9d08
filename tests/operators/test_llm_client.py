"""The LLM client through litellm's real HTTP path, against a scripted OpenAI-compatible server on 127.0.0.1.

No real LLM is involved: every reply below is exactly what the test scripted.
"""
import logging
import os
import subprocess
import sys
import threading
import urllib.request

import pytest

from conftest import REPO
from evo.records.store import RunStore
from llm_server import ScriptedLLMServer
from llm_fakes import IN_PRICE, KEY_ENV, MODEL, OUT_PRICE, SECRET, ask, ok, settings
from llm_fakes import api_key, litellm_loaded  # noqa: F401 (the fixtures)
from operators.llm.client import LLMBudgetExceeded, LLMClient, LLMError
from operators.llm.ledger import ResponseCache

RECORD_KEYS = {"role", "model", "prompt_tokens", "completion_tokens", "cost_usd", "cached", "request_hash"}


def test_plain_completion(tmp_path):
    records = []
    with ScriptedLLMServer([ok("def kernel(): pass", 12, 7)]) as server:
        client = LLMClient(settings(server.url, temperature=0.3, max_tokens=321), recorder=records.append)
        reply = client.complete(ask(), role="coder")
        path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "scripted-model" and body["messages"] == ask()
    assert body["temperature"] == 0.3 and body["max_tokens"] == 321 and not body.get("stream")
    assert reply.text == "def kernel(): pass" and reply.finish_reason == "stop" and reply.model == MODEL
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 7)
    assert reply.cost_usd == pytest.approx(12 * IN_PRICE + 7 * OUT_PRICE) and reply.cost_usd > 0
    assert not reply.cached and len(reply.request_hash) == 64
    assert records == [{"role": "coder", "model": MODEL, "prompt_tokens": 12, "completion_tokens": 7,
                        "cost_usd": reply.cost_usd, "cached": False, "request_hash": reply.request_hash}]
    assert client.totals == {"calls": 1, "cost_usd": pytest.approx(reply.cost_usd)}


def test_finish_reason_length_and_per_call_overrides():
    with ScriptedLLMServer([{**ok("truncated"), "finish_reason": "length"}]) as server:
        client = LLMClient(settings(server.url))
        reply = client.complete(ask(), role="planner", temperature=0.0, model="openai/other-model")
        body = server.requests[0][2]
    assert reply.finish_reason == "length" and reply.model == "openai/other-model"
    assert body["model"] == "other-model" and body["temperature"] == 0.0


def test_unknown_price_without_overrides_costs_zero():
    with ScriptedLLMServer([ok()]) as server:
        client = LLMClient(settings(server.url, input_cost_per_token=None, output_cost_per_token=None))
        assert client.complete(ask(), role="coder").cost_usd == 0.0


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_status_is_retried(status):
    with ScriptedLLMServer([{"status": status}, ok("after retry")]) as server:
        reply = LLMClient(settings(server.url)).complete(ask(), role="coder")
        assert len(server.requests) == 2
    assert reply.text == "after retry" and not reply.cached


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(status):
    with ScriptedLLMServer([{"status": status}, ok("never sent")]) as server:
        client = LLMClient(settings(server.url))
        with pytest.raises(LLMError) as info:
            client.complete(ask(), role="coder")
        assert len(server.requests) == 1
    assert MODEL in str(info.value) and SECRET not in str(info.value)
    assert not isinstance(info.value, LLMBudgetExceeded)
    assert client.totals == {"calls": 0, "cost_usd": 0.0}


def test_timeout_is_retried():
    with ScriptedLLMServer([ok("too late", delay_s=2.0), ok("in time")]) as server:
        reply = LLMClient(settings(server.url, timeout_s=0.5)).complete(ask(), role="coder")
        assert len(server.requests) == 2
    assert reply.text == "in time"


def test_retries_exhausted_raise_llm_error():
    with ScriptedLLMServer([{"status": 500}] * 3) as server:
        with pytest.raises(LLMError, match="after 3 attempt"):
            LLMClient(settings(server.url, max_retries=2)).complete(ask(), role="coder")
        assert len(server.requests) == 3


def test_exhausted_script_answers_500():
    with ScriptedLLMServer([]) as server:
        with pytest.raises(LLMError, match="script exhausted"):
            LLMClient(settings(server.url, max_retries=0)).complete(ask(), role="coder")
        assert len(server.requests) == 1


def test_cache_replays_without_server(tmp_path):
    cache = tmp_path / "llm-cache"
    records = []
    with ScriptedLLMServer([ok("cached text", 30, 40)]) as server:
        url = server.url
        client = LLMClient(settings(url, cache_dir=str(cache)), recorder=records.append)
        first = client.complete(ask(), role="coder")
        second = client.complete(ask(), role="debugger")
        assert len(server.requests) == 1
    assert not first.cached and first.cost_usd > 0
    assert second.cached and second.cost_usd == 0.0 and second.text == "cached text"
    assert second.request_hash == first.request_hash and (second.prompt_tokens, second.completion_tokens) == (30, 40)
    assert [r["cached"] for r in records] == [False, True] and records[1]["role"] == "debugger"
    # issue 42: a replay from the cache counts toward the call budget (it costs nothing)
    assert client.totals == {"calls": 2, "cost_usd": pytest.approx(first.cost_usd)} and client.budget.paid == 1
    assert len(ResponseCache(cache)) == 1

    # The server is gone: a fresh client with the same configuration replays from disk, within its budget; a spent
    # budget refuses even a cached call (a replayed sweep makes the same calls at the same budget).
    replay = LLMClient(settings(url, cache_dir=str(cache)), max_calls=1)
    reply = replay.complete(ask(), role="coder")
    assert reply.cached and reply.text == "cached text" and reply.cost_usd == 0.0
    with pytest.raises(LLMBudgetExceeded):
        replay.complete(ask(), role="coder")
    # A different request is not in the cache and the server is gone: it fails after its retries.
    with pytest.raises(LLMError):
        LLMClient(settings(url, cache_dir=str(cache), max_retries=1)).complete(ask("other"), role="coder")


def test_cache_key_covers_the_full_request(tmp_path):
    cache = str(tmp_path / "c")
    with ScriptedLLMServer([ok("a"), ok("b"), ok("c"), ok("d")]) as server:
        client = LLMClient(settings(server.url, cache_dir=cache))
        hashes = {client.complete(ask(), role="coder").request_hash,
                  client.complete(ask("other prompt"), role="coder").request_hash,
                  client.complete(ask(), role="coder", temperature=0.1).request_hash,
                  client.complete(ask(), role="coder", model="openai/model-b").request_hash}
        assert len(server.requests) == 4
    assert len(hashes) == 4


def test_sample_index_gives_independent_cached_samples(tmp_path):
    cache = str(tmp_path / "c")
    with ScriptedLLMServer([ok("sample 0"), ok("sample 1")]) as server:
        url = server.url
        client = LLMClient(settings(url, cache_dir=cache))
        texts = [client.complete(ask(), role="coder", sample=i).text for i in (0, 1)]
        bodies = [body for _, _, body in server.requests]
        assert len(bodies) == 2 and "sample" not in bodies[1]  # the cache key's field, sent as the request's seed
        assert "seed" not in bodies[0] and bodies[1]["seed"] == 1 and bodies[0] != bodies[1]
    assert texts == ["sample 0", "sample 1"]
    replay = LLMClient(settings(url, cache_dir=cache))
    assert [replay.complete(ask(), role="coder", sample=i).text for i in (1, 0)] == ["sample 1", "sample 0"]


def test_budget_max_calls_stops_before_sending():
    with ScriptedLLMServer([ok("first"), ok("never sent")]) as server:
        client = LLMClient(settings(server.url), max_calls=1)
        assert client.complete(ask("one"), role="coder").text == "first"
        with pytest.raises(LLMBudgetExceeded):
            client.complete(ask("two"), role="coder")
        assert len(server.requests) == 1
    assert client.totals["calls"] == 1


def test_budget_max_cost_stops_before_sending():
    with ScriptedLLMServer([ok("first", 1000, 1000), ok("never sent")]) as server:
        client = LLMClient(settings(server.url), max_cost_usd=1e-4)
        client.complete(ask("one"), role="coder")  # 1000 * 1e-6 + 1000 * 2e-6 = 0.003 USD > budget
        with pytest.raises(LLMBudgetExceeded):
            client.complete(ask("two"), role="coder")
        assert len(server.requests) == 1


def test_failed_calls_do_not_spend_the_budget():
    with ScriptedLLMServer([{"status": 401}, ok("second try")]) as server:
        client = LLMClient(settings(server.url), max_calls=1)
        with pytest.raises(LLMError):
            client.complete(ask(), role="coder")
        assert client.complete(ask(), role="coder").text == "second try"


def test_concurrent_calls_are_bounded_and_counted(tmp_path):
    n = 8
    script = [ok(f"reply {i}", 1, 1, delay_s=0.2) for i in range(n)]
    with ScriptedLLMServer(script) as server:
        client = LLMClient(settings(server.url, concurrency=2), max_calls=n - 2)
        results, errors = [], []

        def worker(i):
            try:
                results.append(client.complete(ask(f"prompt {i}"), role="coder"))
            except LLMBudgetExceeded as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(server.requests) == n - 2
        assert server.max_concurrent == 2
    assert len(results) == n - 2 and len(errors) == 2
    assert sorted(r.text for r in results) == sorted(f"reply {i}" for i in range(n - 2))
    assert client.totals["calls"] == n - 2


def test_identical_concurrent_requests_are_sent_once(tmp_path):
    with ScriptedLLMServer([ok("only once", delay_s=0.3), ok("never sent")]) as server:
        client = LLMClient(settings(server.url, cache_dir=str(tmp_path / "c")))
        replies = []
        threads = [threading.Thread(target=lambda: replies.append(client.complete(ask(), role="coder")))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert len(server.requests) == 1
    assert [r.text for r in replies] == ["only once"] * 4
    assert sorted(r.cached for r in replies) == [False, True, True, True]
    assert client.budget.paid == 1 and client.totals["calls"] == 4  # issue 42: the budget counts the replays too


def test_key_is_sent_but_never_stored_recorded_or_logged(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    records = []
    store = RunStore(tmp_path / "run")
    try:
        recorder = lambda call: (records.append(call), store.add_llm_call(call))  # noqa: E731
        with ScriptedLLMServer([{"status": 429}, ok("x"), {"status": 401}]) as server:
            client = LLMClient(settings(server.url, cache_dir=str(cache)), recorder=recorder)
            client.complete(ask(), role="coder")
            client.complete(ask(), role="coder")  # cache hit
            with pytest.raises(LLMError) as info:
                client.complete(ask("unauthorised"), role="coder")
            auth = [headers.get("Authorization") for _, headers, _ in server.requests]
        assert auth == [f"Bearer {SECRET}"] * 3
        assert [set(r) for r in records] == [RECORD_KEYS] * 2
        assert SECRET not in repr(records) and SECRET not in str(info.value)
        assert [c["cached"] for c in store.llm_calls()] == [0, 1]
        assert store.llm_totals()["calls"] == 1
    finally:
        store.close()
    files = [f for f in cache.rglob("*") if f.is_file()]
    assert files and all(SECRET.encode() not in f.read_bytes() for f in files)
    assert any(b"write a kernel" in f.read_bytes() for f in files)  # the entries are plain text: the check can fail
    assert SECRET not in caplog.text
    assert "write a kernel" not in caplog.text  # no prompt content in log lines either
    assert "retrying" in caplog.text


def test_missing_key_variable_fails_before_sending(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with ScriptedLLMServer([ok()]) as server:
        with pytest.raises(LLMError, match=KEY_ENV):
            LLMClient(settings(server.url)).complete(ask(), role="coder")
        assert server.requests == []


def test_local_server_without_key_gets_a_placeholder(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ambient-secret")
    with ScriptedLLMServer([ok("local")]) as server:
        reply = LLMClient(settings(server.url, api_key_env=None)).complete(ask(), role="coder")
        auth = server.requests[0][1].get("Authorization")
    assert reply.text == "local" and auth == "Bearer no-key"


def test_import_does_not_import_litellm():
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    code = "import operators.llm.client, sys; print([m in sys.modules for m in ('litellm', 'diskcache')])"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.strip() == "[False, False]"  # both come with the first request that needs them


@pytest.mark.parametrize("missing", ["litellm", "httpx2"])
def test_an_unimportable_litellm_names_what_is_missing(monkeypatch, missing):
    """litellm itself missing, or present but missing a dependency of its own (a new openai's httpx2, seen on a GPU
    machine): the error names which, and the fix."""
    import builtins

    from operators.llm import client

    real_import = builtins.__import__

    def refusing(name, *args, **kwargs):
        if name == "litellm":
            raise ModuleNotFoundError(f"No module named '{missing}'", name=missing)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(client, "_litellm", None)
    monkeypatch.setattr(builtins, "__import__", refusing)
    with pytest.raises(LLMError) as info:
        client._load_litellm()
    message = str(info.value)
    assert "pip install litellm" in message
    assert ("litellm is not installed" in message) == (missing == "litellm")
    assert (f"it needs '{missing}'" in message) == (missing != "litellm")


def test_server_stops_promptly_with_a_sleeping_handler():
    server = ScriptedLLMServer([ok(delay_s=30)]).start()
    req = urllib.request.Request(server.url + "/chat/completions", data=b'{"model": "m", "messages": []}',
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(OSError):  # the handler sleeps; the caller times out
        urllib.request.urlopen(req, timeout=0.3)
    slept = threading.Timer(30, lambda: None)  # ends when the handler's sleep would
    slept.start()
    server.stop()
    assert slept.is_alive()  # stopped before the handler's sleep was over
    slept.cancel()
