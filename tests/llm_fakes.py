"""The LLM tests' shared fakes and helpers (tests import these, never each other): the scripted server's replies
(``ok``, ``reply``, by role), the client's settings against it, a one-generation LLM run, and the team in-process
with its context on the interpreter at test sizes."""
from __future__ import annotations

import itertools
import random
import re
import socket
import threading
from pathlib import Path

import pytest

from conftest import CANDIDATES, SCALE_SHIFT, kernelevo
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from fitness.problems.problem import resolve_problem
from kernelevo.core.evaluation_record import EvalResult
from fitness.problems.target import target_for
from hardware_profiles import load_profile
from llm_server import ScriptedLLMServer
from operators.base import CURRENT_CHILD, ChildUsage, OperatorContext
from operators.llm.client import LLMClient, LLMSettings
from operators.llm.context import ContextBuilder, ContextSettings
from operators.llm.operators import LLMMutation
from operators.llm.team import LLMTeam, TeamSettings


# the LLM tests: scripted replies, settings, the team against the scripted server --------------------------------
SECRET = "sk-test-secret"
KEY_ENV = "KERNELEVO_TEST_LLM_KEY"
MODEL = "openai/scripted-model"
IN_PRICE, OUT_PRICE = 1e-6, 2e-6
GOOD = (CANDIDATES / "good.py").read_text()
PARENT_GENOME = Genome.from_source(GOOD)
INTERPRETED = {"timer": "interpreter", "device": "cpu", "sizes": {"dim": 4000}, "hardware_profile": "h100_sxm"}
RUN_KEY = "sk-kernelevo-test-secret-0123456789"  # the key of an LLM run's scripted server
RUN_PLAN = "## Plan\n1. [constant BLOCK, line 7] raise BLOCK so each program covers more elements: fewer programs."


def ok(content="hello", prompt_tokens=12, completion_tokens=7, **extra):
    """A chat completion as the scripted server sends it."""
    return {"content": content, "finish_reason": "stop",
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}, **extra}


def reply(text: str, prompt_tokens: int = 900, completion_tokens: int = 300) -> dict:
    return {"content": text, "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def ask(text="write a kernel"):
    return [{"role": "system", "content": "You write Triton kernels."}, {"role": "user", "content": text}]


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture(scope="module", autouse=True)
def litellm_loaded():
    """litellm imported once per module, before any test is timed or a process is forked (the import alone takes
    seconds). Modules of LLM tests import this fixture and ``api_key`` from here."""
    from operators.llm import client

    client._load_litellm()


def settings(server_url, **overrides) -> LLMSettings:
    base = dict(model=MODEL, api_base=server_url, api_key_env=KEY_ENV, timeout_s=5.0, max_retries=3,
                backoff_s=0.01, input_cost_per_token=IN_PRICE, output_cost_per_token=OUT_PRICE)
    return LLMSettings(**{**base, **overrides})


# the client's time-out: 1 s timed out an answer of the scripted server on a loaded machine (a CI run of 06f1b52),
# and the retry found the script spent; the scripted time-outs wait 3 s
TIMEOUT_S = 2.5


def run(tmp_path: Path, cache: Path, *extra: str, api_base: str, key: str = RUN_KEY, children: int = 2,
        in_flight: int = 1):
    """A one-generation LLM run; `in_flight` children at once (1: the script's replies come in a fixed order)."""
    args = [f"problem={SCALE_SHIFT}", f"problem.seed={CANDIDATES / 'good.py'}", "+problem.sizes.dim=4000",
            "operators=llm_mutation", "llm=local", "llm.model=openai/scripted-model", f"llm.api_base={api_base}",
            "llm.api_key_env=KERNELEVO_TEST_LLM_KEY", f"llm.cache_dir={cache}", f"llm.timeout_s={TIMEOUT_S}",
            "llm.backoff_s=0.01", "llm.input_cost_per_token=1e-6", "llm.output_cost_per_token=2e-6",
            # measured figures would make each run's prompts differ; without them a rerun's requests are identical
            "llm.context.parts.profiling=false", "llm.context.parts.top_k=false",
            "search.mu=1", f"search.lambda_={children}", f"search.parallel={in_flight}", "search.generations=1",
            "search.patience=null",
            "search.tuner.trials=1", "fitness.trials=2", "fitness.timing.interpreter_reps=1", *extra]
    return kernelevo("run", *args, cwd=tmp_path, env={"KERNELEVO_TEST_LLM_KEY": key})


def refused_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a port just freed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def role_of(body) -> str:
    return body["messages"][0]["content"].split("Your role: ", 1)[1].split(".", 1)[0]


class Replies:
    """A plan for a planner, a new correct kernel (its own BLOCK and VARIANT) for a coder."""

    def __init__(self):
        self.made, self.lock = itertools.count(), threading.Lock()

    def __call__(self, body):
        if role_of(body) == "planner":
            return reply("## Plan\nIdea: raise BLOCK\n1. [constant BLOCK, line 7] raise BLOCK: fewer programs.")
        with self.lock:
            n = next(self.made)
        block = (256, 512, 1024, 2048)[n % 4]
        kernel = GOOD.replace('BLOCK = 128\nTUNABLE = {"BLOCK": [64, 128, 256]}',
                              f'BLOCK = {block}\nVARIANT = {n}\nTUNABLE = {{"BLOCK": [{block}]}}')
        return reply(f"```python\n{kernel}```")


# the LLM team in-process: context on the interpreter at test sizes, replies by role ------------------------------
PROBLEM = Path(SCALE_SHIFT).read_text()
IDEA = "one program per row with the whole row in registers"
PLAN = f"## Plan\nIdea: {IDEA}\n1. [constant BLOCK, line 7] raise BLOCK so a program covers a whole row."


def target(problem=SCALE_SHIFT, profile="h100_sxm", size_preset="full", sizes=None):
    return target_for(resolve_problem(problem, sizes=sizes or {}, size_preset=size_preset), "cpu",
                      load_profile(profile), tf32=True)


def builder(**settings) -> ContextBuilder:
    return ContextBuilder(ContextSettings(**settings), target(sizes={"dim": 4000}), PROBLEM)


def ind(name, genome, time_s, operator="llm_mutation", parents=(), note="", status="ok", where=None):
    generation = int(name.split(".")[0])
    return Individual(name, genome.with_note(note) if note else genome, parents=parents, operator=operator,
                      generation=generation, result=EvalResult(status=status, time_s=time_s, **(where or INTERPRETED)))


def interpreted(name: str, genome: Genome, time_s: float | None, status: str = "ok", parents=(), note: str = "",
                operator: str = "llm_mutation", reason: str = "") -> Individual:
    """An individual judged on the interpreter at test sizes (no generation: the context's tests)."""
    return Individual(name, genome.with_note(note) if note else genome, parents=parents, operator=operator,
                      result=EvalResult(status=status, time_s=time_s, reason=reason, **INTERPRETED))


PARENT = interpreted("1.0", PARENT_GENOME, 0.012, parents=("0.0",), note="1. [constant BLOCK, line 7] raise BLOCK")


def by_role(body: dict) -> dict:
    role = re.search(r"Your role: (\w+)", body["messages"][0]["content"])[1]
    return reply(PLAN if role == "planner" else f"```python\n{GOOD.replace('BLOCK = 128', 'BLOCK = 256')}```")


@pytest.fixture
def server():
    with ScriptedLLMServer(by_role) as running:
        yield running


def live_team(server, tmp_path, **context) -> LLMTeam:
    settings = LLMSettings(model="openai/scripted-model", api_base=server.url, max_retries=0, timeout_s=30,
                           cache_dir=str(tmp_path / "cache"))
    return LLMTeam(LLMClient(settings), builder(**context), TeamSettings(), {"name": "triton"})


def mutate(team, parent, archive, child="2.0", duplicates=(), rank=1, independent=False):
    """An LLM mutation of `parent` for `child`, the `rank`-th child of that parent (``OperatorContext.rank``)."""
    token = CURRENT_CHILD.set(ChildUsage(child))
    try:
        context = OperatorContext(generation=2, team=team, archive=tuple(archive), duplicates=tuple(duplicates),
                                  rank=rank, independent=independent)
        return LLMMutation()([parent], random.Random(0), context)
    finally:
        CURRENT_CHILD.reset(token)
