"""The LLM team in a full run, through litellm's real HTTP client against a scripted OpenAI-compatible server.

The script holds what a model might answer: a plan, an improved correct kernel, a reply with no code, a broken
kernel that the debugger's reply fixes, a 429 and a timeout (each followed by success). Nothing here pretends to
be a model: the server replies exactly what the script says.
"""
import json
from pathlib import Path

import pytest

from conftest import kernelevo, read_store, run_dir_of
from kernelevo.core.genome import evaluation_key
from kernelevo.core.individual import LAUNCHES
from llm_fakes import GOOD, reply, role_of, run
from llm_fakes import RUN_KEY as KEY
from llm_fakes import RUN_PLAN as PLAN
from fitness.common.formatting import seconds as format_seconds
from llm_server import ScriptedLLMServer

pytestmark = pytest.mark.slow  # each test is a whole `kernelevo run` or two

IMPROVED = GOOD.replace("BLOCK = 128\nTUNABLE = {\"BLOCK\": [64, 128, 256]}", "BLOCK = 1024\nTUNABLE = {\"BLOCK\": [1024]}")
BROKEN = GOOD.replace("BLOCK = 128\nTUNABLE = {\"BLOCK\": [64, 128, 256]}", "BLOCK = 64\nTUNABLE = {\"BLOCK\": [64]}") \
    .replace("x = tl.load(x_ptr + offs, mask=mask)", "x = tl.load(x_ptr + offs, mask=mask) + undefined_thing")
FIXED = BROKEN.replace(" + undefined_thing", "")


SCRIPT = [
    {"status": 429},                                     # planner, offspring 1: rate limited ...
    reply(PLAN),                                         # ... then answers
    reply(f"Here is the kernel:\n```python\n{IMPROVED}```\nIt launches 8x fewer programs."),  # coder: improved
    {"delay_s": 3, **reply(PLAN)},                       # planner, offspring 2: times out ...
    reply(PLAN),                                         # ... then answers
    reply("Sure! I will raise the block size as planned."),  # coder: no code -> told so, retried
    reply(f"```python\n{BROKEN}```"),                    # coder: a kernel that does not compile
    reply(f"The name was undefined; fixed:\n```python\n{FIXED}```"),  # debugger: repaired
]


def lineage(run_dir: Path) -> list[tuple]:
    return [(ind.operator, ind.generation, ind.status, ind.note)
            for ind in read_store(run_dir, lambda store: store.individuals())]


def llm_calls(run_dir: Path) -> list[tuple]:
    return [(c["role"], c["prompt_tokens"], c["completion_tokens"], c["cost_usd"], c["cached"], c["individual"])
            for c in read_store(run_dir, lambda store: store.llm_calls())]


def test_llm_run_improves_repairs_records_and_replays_from_cache(tmp_path):
    cache = tmp_path / "llm-cache"
    with ScriptedLLMServer(SCRIPT) as server:
        url = server.url
        first = run(tmp_path, cache, api_base=url)
        requests = server.requests
    assert first.returncode == 0, first.stdout + first.stderr
    run_dir = run_dir_of(first.stdout)

    # on the interpreter no time ranks kernels (issue 66): the best is one of the fewest launches, never chosen for
    # its interpreter wall-clock; the repaired child is a correct child too
    summary = json.loads((run_dir / "summary.json").read_text())
    ranks = read_store(run_dir, lambda store: {ind.id: ind.rank for ind in store.individuals() if ind.ok})
    assert summary["ranked_by"] == LAUNCHES and ranks[summary["best_id"]] == min(ranks.values())
    children = [row for row in lineage(run_dir) if row[0] == "llm_mutation"]
    assert len(children) == 2 and all(status == "ok" for _, _, status, _ in children)
    assert all("raise BLOCK" in note for *_, note in children)  # the plan that made each child

    # every request went through HTTP (2 retried), every agent call was recorded with tokens and cost
    assert len(requests) == len(SCRIPT)
    assert any(headers.get("Authorization") == f"Bearer {KEY}" for _, headers, _ in requests)
    calls = llm_calls(run_dir)
    assert [c[0] for c in calls] == ["planner", "coder", "planner", "coder", "coder", "debugger"]
    assert all(c[1] == 900 and c[2] == 300 and abs(c[3] - 1.5e-3) < 1e-9 and c[4] == 0 for c in calls)
    assert [c[5] for c in calls] == ["1.0"] * 2 + ["1.1"] * 4  # each call charged to the child it made
    usage = {ind.id: ind.llm for ind in read_store(run_dir, lambda store: store.individuals())}
    assert usage["1.0"]["calls"] == 2 and usage["1.1"]["calls"] == 4
    assert abs(usage["1.1"]["cost_usd"] - 4 * 1.5e-3) < 1e-9 and usage["0.0"] == {}

    # the key is nowhere on disk, in the output or in the report
    report = kernelevo("report", f"run_dir={run_dir}", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    for path in [*run_dir.rglob("*"), *cache.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in first.stdout + first.stderr + report.stdout

    # the same configuration again, its server gone (the check before the run skipped, as the check's own error says
    # to): every reply comes from the cache, and the lineage is the same
    second = run(tmp_path, cache, "llm.check=false", api_base=url)
    assert second.returncode == 0, second.stdout + second.stderr
    rerun_dir = run_dir_of(second.stdout)
    assert [row[:3] + (row[3],) for row in lineage(rerun_dir)] == [row[:3] + (row[3],) for row in lineage(run_dir)]
    assert all(c[4] == 1 and c[3] == 0 for c in llm_calls(rerun_dir))


def test_llm_call_budget_stops_the_search_mid_generation(tmp_path):
    with ScriptedLLMServer([reply(PLAN), reply(f"```python\n{IMPROVED}```"), reply(f"```python\n{FIXED}```"),
                            reply(PLAN)]) as server:
        proc = run(tmp_path, tmp_path / "cache", "llm.budget.max_calls=3", "search.generations=2", api_base=server.url)
        # issue 42: a child starts only when the budget can carry its plan and code; issue 66: the one call left is
        # not stranded, it codes a child without a plan
        roles = [role_of(body) for _, _, body in server.requests]
        assert roles == ["planner", "coder", "coder"]
        assert "(no plan: improve the kernel's speed" in server.requests[2][2]["messages"][1]["content"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "operator budget spent" in proc.stdout and "3 of 3 calls made or held, 0 left" in proc.stdout


def test_children_ask_the_llm_concurrently(tmp_path):
    """8 children of a generation in flight with llm.concurrency=8, a server answering each request after 2 s:
    the generation's LLM calls take about as long as one child's (a plan, then its code: 4 s), not 8 times that."""
    kernels = [GOOD.replace('BLOCK = 128\nTUNABLE = {"BLOCK": [64, 128, 256]}', f'BLOCK = {b}\nTUNABLE = {{"BLOCK": [{b}]}}')
               for b in (16, 32, 64, 256, 512, 1024, 2048, 4096)]
    delay_s = 2.0
    script = [{"delay_s": delay_s, **reply(PLAN)} for _ in kernels] + \
             [{"delay_s": delay_s, **reply(f"```python\n{kernel}```")} for kernel in kernels]
    with ScriptedLLMServer(script) as server:
        proc = run(tmp_path, tmp_path / "cache", "llm.concurrency=8", "llm.timeout_s=30", api_base=server.url,
                   children=8, in_flight=8)
        concurrent, requests = server.max_concurrent, len(server.requests)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert requests == 16 and concurrent == 8  # the eight children's calls at once: not one after the other
    children = [row for row in lineage(run_dir_of(proc.stdout)) if row[0] == "llm_mutation"]
    assert len(children) == 8 and all(status == "ok" for _, _, status, _ in children)


def test_the_initialiser_rewrites_the_seed_and_a_broken_rewrite_leaves_the_seed(tmp_path):
    for name, answer, expected_operator, expected_block in (("kept", IMPROVED, "initialiser", "BLOCK = 1024"),
                                                            ("broken", BROKEN, "seed", "BLOCK = 128")):
        with ScriptedLLMServer([reply(f"```python\n{answer}```")]) as server:
            done = run(tmp_path, tmp_path / f"cache-{name}", "llm.initialise=from_seed", "search.generations=0",
                       api_base=server.url)
            requests = server.requests
        assert done.returncode == 0, done.stdout + done.stderr
        prompt = requests[0][2]["messages"][-1]["content"]
        assert "Starting kernel" in prompt and "the problem's seed kernel" in prompt and "BLOCK = 128" in prompt
        run_dir = run_dir_of(done.stdout)
        seed = read_store(run_dir, lambda store: store.individual("0.0"))
        assert seed.operator == expected_operator and expected_block in seed.genome.source
        assert ("rewrite of the seed is not usable" in done.stdout) == (name == "broken")
        # the seed on record is the seed, with its own time as written; the rewrite is the starting kernel
        summary = json.loads((run_dir / "summary.json").read_text())
        seed_key = evaluation_key(GOOD)
        seed_written = read_store(run_dir, lambda store: store.evaluation(seed_key)).time_s
        assert summary["seed"] == "seed" and summary["seed_written_s"] == seed_written
        assert summary["seed_rewritten_by"] == ("initialiser" if name == "kept" else "")
        assert (summary["start_s"] == seed.time_s) if name == "kept" else summary["seed_s"] == seed.time_s
        root = next(line for line in (run_dir / "report.md").read_text().splitlines() if "`0.0 " in line)
        written = format_seconds(seed_written)
        assert (f"the initialiser's rewrite of the seed (seed, as written {written})" if name == "kept"
                else f"as written {written}") in root, root


def test_a_child_that_duplicates_a_kernel_is_told_so_and_the_next_request_differs(tmp_path):
    other_plan = "## Plan\n1. [constant BLOCK, line 7] raise BLOCK to 1024."
    script = [reply(PLAN), reply(f"```python\n{GOOD}```"),  # the seed again: a duplicate
              reply(other_plan), reply(f"```python\n{IMPROVED}```")]
    with ScriptedLLMServer(script) as server:
        done = run(tmp_path, tmp_path / "cache", api_base=server.url, children=1)
        requests = server.requests
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(requests) == 4  # not one identical request per attempt
    prompts = [body["messages"][-1]["content"] for _, _, body in requests]
    assert "already exists" not in prompts[0] and "made a kernel that already exists" in prompts[2]
    assert prompts[0] != prompts[2]
    child = read_store(run_dir_of(done.stdout), lambda store: store.individual("1.0"))
    assert child.ok and "BLOCK = 1024" in child.genome.source
