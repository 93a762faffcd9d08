"""The LLM reply cache shared by processes: two runs asking the same request at once through one ``llm.cache_dir``
send it once (the second waits for the first and replays its reply); a process that dies holding a request's lock
does not hold it for ever. Against the scripted OpenAI-compatible server; the processes are forked from the test."""
import multiprocessing
import os
import signal
import threading

from llm_server import ScriptedLLMServer
from operators.llm.client import LLMClient
from operators.llm.ledger import ResponseCache
from llm_fakes import ask, ok, settings
from llm_fakes import api_key, litellm_loaded  # noqa: F401 (the fixtures)

FORK = multiprocessing.get_context("fork")




def ask_in_a_process(url: str, cache: str, start, replies) -> None:
    """A forked run's LLM call: the same request as every other, all released at once by `start`."""
    client = LLMClient(settings(url, cache_dir=cache))
    start.wait(timeout=20)
    reply = client.complete(ask(), role="coder")
    replies.put((reply.text, reply.cached))


def test_two_processes_sharing_the_cache_send_an_identical_request_once(tmp_path):
    cache = tmp_path / "llm-cache"
    with ScriptedLLMServer([ok("only once", delay_s=0.5), ok("never sent")]) as server:
        start, replies = FORK.Barrier(2), FORK.Queue()
        runs = [FORK.Process(target=ask_in_a_process, args=(server.url, str(cache), start, replies))
                for _ in range(2)]
        for run in runs:
            run.start()
        got = sorted(replies.get(timeout=30) for _ in runs)
        for run in runs:
            run.join(timeout=10)
        assert len(server.requests) == 1
    assert got == [("only once", False), ("only once", True)]
    assert [run.exitcode for run in runs] == [0, 0]


def hold_until_killed(cache: str, key: str, held) -> None:
    with ResponseCache(cache).hold(key):
        held.set()
        threading.Event().wait(60)


def test_a_lock_dies_with_the_process_that_held_it(tmp_path):
    cache, key = str(tmp_path / "c"), "a" * 64
    assert not os.path.exists(cache)  # nothing is made before the first use
    held = FORK.Event()
    holder = FORK.Process(target=hold_until_killed, args=(cache, key, held))
    holder.start()
    assert held.wait(timeout=20)
    taken = threading.Event()

    def take():
        with ResponseCache(cache).hold(key):
            taken.set()

    waiter = threading.Thread(target=take, daemon=True)
    waiter.start()
    assert not taken.wait(timeout=0.3)  # held by the other process
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(timeout=10)
    assert taken.wait(timeout=5)


def test_an_unreadable_entry_or_another_requests_is_a_miss_and_an_unlockable_cache_still_answers(tmp_path, caplog):
    cache, payload = ResponseCache(tmp_path / "c"), {"messages": ask()}
    cache.put("k1", payload, {"text": "stored"})
    assert cache.get("k1", payload) == {"text": "stored"}
    assert cache.get("k1", {"messages": ask("other")}) is None  # a hash collision, or an entry edited by hand
    cache._opened().set("k2", "{not json")
    assert cache.get("k2", payload) is None and "unreadable entry" in caplog.text
    (tmp_path / "c" / "locks").write_text("a file where the lock directory should be")
    with cache.hold("k1"):  # no lock can be made: a warning, and the call goes on
        assert cache.get("k1", payload) == {"text": "stored"}
    assert "may be sent twice" in caplog.text
