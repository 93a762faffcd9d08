"""A killed LLM run resumes from exactly its last checkpoint: the interrupted generation is made again with the same
prompts, so every LLM reply comes from the cache (the server is gone) and the lineage is the one the killed run was
making, paid calls counted once.

The run is killed mid-generation for real (SIGKILL): generation 2's last child asks for a kernel whose evaluation
takes a few seconds on the interpreter, and the kill comes once its reply is in the cache, while it is evaluated,
after the first child of that generation was stored but before the generation's checkpoint.
"""
import os
import re
import signal
import sqlite3
import time

import pytest

from conftest import CANDIDATES, SCALE_SHIFT, kernelevo, read_store, run_dir_of
from evo.records.store import StoreError
from llm_server import ScriptedLLMServer
from operators.llm.ledger import ResponseCache
from llm_fakes import GOOD, reply
from llm_fakes import RUN_KEY as KEY
from llm_fakes import RUN_PLAN as PLAN

pytestmark = pytest.mark.slow  # each test is a whole `kernelevo run` or two

CALLS = 8  # two generations of two children, each a plan and its code
SLOW_LOOP = "    for _ in range(600):\n        x = x + 0.0\n"  # the same result, slowly on the interpreter


def kernel(block: int, slow: bool = False) -> str:
    source = GOOD.replace('BLOCK = 128\nTUNABLE = {"BLOCK": [64, 128, 256]}',
                          f'BLOCK = {block}\nTUNABLE = {{"BLOCK": [{block}]}}')
    load = "    x = tl.load(x_ptr + offs, mask=mask)\n"
    return source.replace(load, load + SLOW_LOOP) if slow else source


class Replies:
    def __init__(self):
        self.code_calls = 0

    def __call__(self, body: dict) -> dict:
        if "Your role: planner." in body["messages"][0]["content"]:
            return reply(PLAN)
        self.code_calls += 1
        block = (256, 512, 1024, 2048)[self.code_calls - 1]
        return reply(f"```python\n{kernel(block, slow=self.code_calls == 4)}```")


def command(cache, url: str) -> list[str]:
    return [f"problem={SCALE_SHIFT}",
            f"problem.seed={CANDIDATES / 'good.py'}", "+problem.sizes.dim=4000", "operators=llm_mutation",
            "llm=local", "llm.model=openai/scripted-model", f"llm.api_base={url}",
            "llm.api_key_env=KERNELEVO_TEST_LLM_KEY", f"llm.cache_dir={cache}", "llm.timeout_s=2",
            "llm.max_retries=1", "llm.backoff_s=0.01", "llm.input_cost_per_token=1e-6",
            "llm.output_cost_per_token=2e-6", "search.mu=1", "search.lambda_=2", "search.parallel=1",
            "search.generations=2", "search.patience=null", "search.tuner.trials=1", "fitness.trials=2",
            "fitness.timing.interpreter_reps=1"]


def lineage(run_dir) -> list[tuple]:
    return [(ind.id, ind.operator, ind.parents, ind.note, ind.key, ind.status)
            for ind in read_store(run_dir, lambda store: store.individuals())]


def paid_calls(cwd) -> int:
    """The LLM calls the run started in `cwd` has recorded in its store so far (0 before it has a store)."""
    stores = sorted(cwd.glob("outputs/runs/*/*/run.db"))
    if not stores:
        return 0
    try:
        return read_store(stores[0].parent, lambda store: store.llm_totals()["calls"])
    except (StoreError, sqlite3.Error):
        return 0


def test_a_run_killed_mid_generation_resumes_with_the_same_prompts_from_the_cache(tmp_path):
    env = {"KERNELEVO_TEST_LLM_KEY": KEY}
    cache = tmp_path / "cache"
    with ScriptedLLMServer(Replies()) as server:
        url = server.url
        killed = kernelevo("run", *command(cache, url), cwd=tmp_path, env=env, wait=False)
        deadline = time.monotonic() + 300
        cached = ResponseCache(cache)
        # the reply is cached before the run records the call: wait for both (a kill between the two, seen under
        # load, leaves a call replayed from the cache that no run paid for)
        while ((len(cached) < CALLS or paid_calls(tmp_path) < CALLS) and killed.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.02)
        os.kill(killed.pid, signal.SIGKILL)  # the last child's reply is in; its slow evaluation has begun
        output = killed.communicate(timeout=60)[0]
    assert len(cached) == CALLS, output
    run_dir = run_dir_of(output)
    before = read_store(run_dir, lambda store: (store.latest_checkpoint().generation, lineage(run_dir),
                                                store.llm_calls(), store.llm_totals()))
    checkpoint, made, calls, paid = before
    assert checkpoint == 1 and [row[0] for row in made] == ["0.0", "1.0", "1.1", "2.0"], output  # 2.1 unfinished
    assert paid["calls"] == CALLS

    resumed = kernelevo("resume", f"run_dir={run_dir}", cwd=tmp_path, env=env)  # the server is stopped
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"warning: the LLM check failed: nothing answers at {url}" in resumed.stdout  # a warning: the cache replays
    after, all_calls, totals = read_store(run_dir, lambda store: (lineage(run_dir), store.llm_calls(),
                                                                  store.llm_totals()))
    assert after[:len(made)] == made  # what the killed run made, made again identically
    assert [row[0] for row in after] == ["0.0", "1.0", "1.1", "2.0", "2.1"] and after[-1][5] == "ok"
    assert "for _ in range(600)" in read_store(run_dir, lambda store: store.individual("2.1")).genome.source
    replayed = all_calls[len(calls):]
    generation_2 = [c["request_hash"] for c in calls if c["individual"].startswith("2.")]
    assert [c["request_hash"] for c in replayed] == generation_2 and all(c["cached"] for c in replayed)
    assert totals == paid  # the replayed calls were paid once, by the killed run
    assert re.search(r"gen +2 \|", resumed.stdout)
