"""What the agents are told, in a real two-generation CPU run through litellm against the scripted server: the
prompts name the target GPU and the problem's full size with its cost model, label measured figures, show the
parent once and everything else against it, list attempts with plan, outcome, time and change, give the debugger
the failing kernel line, the plan, the diff and where it ran; the coder edits plain code; a crossover gets two
distinct parents; prompt sizes land in the run store and the report; profiling asked for on the CPU is a note.

The server answers by role from the request itself (the coder's SEARCH text is copied from its prompt), so the
replies do not depend on which child asks first. Nothing here is a model: the replies are fixed edits.
"""
import re
from types import SimpleNamespace

import pytest

from conftest import kernelevo, read_store, run_dir_of
from kernelevo.core.genome import evaluation_key
from llm_server import ScriptedLLMServer
from operators.llm.team import LLMTeam, TeamSettings
from llm_fakes import GOOD, reply, run
from llm_fakes import RUN_PLAN as PLAN

BROKEN_LOAD = "x = tl.load(x_ptr + offs, mask=mask) + undefined_thing"


class ByRole:
    """Replies from what each request shows: the coder moves BLOCK to a new value (its first edit also breaks the
    kernel), the debugger removes the break, the crossover writes parent A with a new BLOCK."""

    def __init__(self):
        self.blocks = iter([256, 512, 1024, 64, 32, 2048, 16, 4096, 8192])
        self.broke = False

    def __call__(self, body: dict) -> dict:
        role = re.search(r"Your role: (\w+)", body["messages"][0]["content"])[1]
        prompt = body["messages"][1]["content"]
        block = next(self.blocks)
        if role == "planner":
            return reply(PLAN)
        if role == "debugger":
            failing = re.search(r"## Failing kernel\n```python\n(.*?)\n```", prompt, re.S)[1]
            return reply(f"```python\n{failing.replace(' + undefined_thing', '')}\n```")
        if role == "crossover":
            parent_a = re.search(r"## Parent A\n.*?```python\n(.*?)\n```", prompt, re.S)[1]
            child = re.sub(r"(?m)^BLOCK = \d+\nTUNABLE = .*$", f'BLOCK = {block}\nTUNABLE = {{"BLOCK": [{block}]}}',
                           parent_a)
            return reply(f"```python\n{child}\n```")
        listing = re.search(r"## Parent kernel [\d.]+ \(numbered\)\n```\n(.*?)```", prompt, re.S)[1]
        parent = re.sub(r"(?m)^ *\d+\| ?", "", listing)
        old = re.search(r"^BLOCK = \d+\nTUNABLE = .*$", parent, re.M)[0]
        new = f'BLOCK = {block}\nTUNABLE = {{"BLOCK": [{block}]}}'
        edits = f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"
        if not self.broke:
            self.broke = True
            load = "    x = tl.load(x_ptr + offs, mask=mask)"
            edits += f"<<<<<<< SEARCH\n{load}\n=======\n    {BROKEN_LOAD}\n>>>>>>> REPLACE\n"
        return reply(edits)


def prompts_of(requests, role: str) -> list[str]:
    return [body["messages"][1]["content"] for _, _, body in requests
            if f"Your role: {role}." in body["messages"][0]["content"]]


@pytest.mark.slow
def test_every_role_is_told_the_target_and_what_differs(tmp_path):
    with ScriptedLLMServer(ByRole()) as server:
        done = run(tmp_path, tmp_path / "cache", "operators=llm", "operators.list.1.weight=1.0",
                   "llm.edit_format=diff", "hardware.profile=h100_sxm", "fitness.profile=ncu",
                   "llm.context.parts.profiling=true", "llm.context.parts.top_k=true", "search.mu=2",
                   "search.generations=2", "fitness.timing.interpreter_reps=1", api_base=server.url, children=3)
        requests = server.requests
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    start = next(line for line in done.stdout.splitlines() if "run dir" in line)
    assert "target NVIDIA H100 SXM5 80GB (hardware.profile=h100_sxm) at full sizes batch_size=4, dim=100" in start
    assert "profiler: no profiler metrics on the CPU interpreter" in start

    planners = prompts_of(requests, "planner")
    for prompt in planners:  # the target, its cost model at full size, measured figures labelled
        assert "## Target GPU\nNVIDIA H100 SXM5 80GB (hardware profile h100_sxm): 132 SMs" in prompt
        assert "## Problem at full size\nSizes: batch_size=4, dim=100." in prompt and "memory bound" in prompt
        assert "correct on the CPU interpreter at test sizes (batch_size=4, dim=4000); no GPU time" in prompt
        assert "Triton CPU interpreter: 1 SMs" not in prompt and "e+" not in prompt
        assert prompt.count("def scale_shift_kernel") == 1  # the parent once; the rest as changes against it
    later = [p for p in planners if "## Already tried from this lineage" in p]
    assert later, "no planner saw what was already tried"
    tried = later[-1].split("## Already tried from this lineage")[1].split("\n## ")[0]
    assert re.search(r'- \d\.\d \(llm_mutation of [\d.]+\): "\[constant BLOCK, line 7\] raise BLOCK.*" -> ok; '
                     r'change: BLOCK \d+ -> \d+', tried), tried  # no interpreter time, no ratio of them

    (debugger,) = prompts_of(requests, "debugger")
    assert f"failing line 15, in scale_shift_kernel: {BROKEN_LOAD}" in debugger
    assert "## The plan it implements\n1. [constant BLOCK, line 7]" in debugger
    assert "```diff\n--- parent 0.0\n+++ failing kernel" in debugger and f"+    {BROKEN_LOAD}" in debugger
    assert "It was evaluated on the CPU through Triton's interpreter" in debugger

    coder = prompts_of(requests, "coder")[0]
    assert "## Parent kernel 0.0 (numbered)\n```\n" in coder and "   7| BLOCK" in coder
    assert "without the listing's line numbers" in coder

    crossovers = prompts_of(requests, "crossover")
    assert crossovers, "no crossover request in a population of two"
    for prompt in crossovers:
        a, b = re.search(r"## Parent A\n([\d.]+):", prompt)[1], re.search(r"## Parent B\n([\d.]+):", prompt)[1]
        assert a != b

    run_dir = run_dir_of(done.stdout)
    sizes = read_store(run_dir, lambda store: store.prompt_sizes())
    assert {"planner", "coder", "debugger", "crossover"} <= set(sizes)
    assert sizes["planner"]["prompts"] == len(planners) and sizes["planner"]["max_chars"] >= len(planners[-1])
    assert {"parent", "hardware", "cost_model", "problem", "system"} <= set(sizes["planner"]["parts"])
    seed_key = evaluation_key(read_store(run_dir, lambda store: store.individual("0.0")).genome.rendered())
    assert read_store(run_dir, lambda store: store.profile(seed_key))["note"].startswith("no profiler metrics")
    report = kernelevo("report", f"run_dir={run_dir}", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    text = (run_dir / "report.md").read_text()
    assert "## LLM prompt sizes" in text and re.search(r"\| planner \| \d+ \| \d+ \| \d+ \| ", text)
    assert re.search(r"## Profiler feedback\n\n0 of \d+ kernels profiled\n- no profiler metrics on the CPU "
                     r"interpreter", text)


class FakeClient:
    """Replies from a list, in order, and keeps every request's messages (no HTTP: the team's own logic)."""

    def __init__(self, *texts: str):
        self.texts, self.requests = list(texts), []

    def complete(self, messages, **kwargs):
        self.requests.append([dict(m) for m in messages])
        return SimpleNamespace(text=self.texts.pop(0), finish_reason="stop")


def team(client, sizes: list) -> LLMTeam:
    from llm_fakes import builder

    return LLMTeam(client, builder(), TeamSettings(), {"name": "triton"},
                   on_prompt=lambda role, chars, parts: sizes.append((role, chars, parts)))


def test_a_crossover_that_repeated_a_kernel_asks_anew_and_a_bad_tunable_is_sent_back():
    from llm_fakes import PARENT, PARENT_GENOME
    from llm_fakes import interpreted as ind

    other = ind("1.1", PARENT_GENOME.with_params({"BLOCK": 256}), 0.01, parents=("0.0",))
    sizes: list = []
    client = FakeClient(f"```python\n{GOOD}```", f"```python\n{GOOD}```")
    team(client, sizes).crossover(PARENT, other)
    team(client, sizes).crossover(PARENT, other, duplicates=("crossover",))
    first, second = (request[-1]["content"] for request in client.requests)
    assert first != second and "repeated a kernel that already exists" in second
    assert "## Parent B\n1.1: " in first and "as a diff against parent A" in first
    role, chars, parts = sizes[0]
    assert role == "crossover" and chars == sum(parts.values()) and parts["parent_a"] > parts["parent_b"]

    bad = GOOD.replace('TUNABLE = {"BLOCK": [64, 128, 256]}', 'TUNABLE = {"BLOCK": [64, 256]}')
    client = FakeClient(f"```python\n{bad}```", f"```python\n{GOOD}```")
    assert team(client, sizes).code(PARENT, "raise BLOCK") == GOOD
    assert "TUNABLE is not usable: BLOCK = 128 is not among its TUNABLE choices [64, 256]" in \
        client.requests[1][-1]["content"]
