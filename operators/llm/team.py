"""The LLM agents, STARK-style: a planner that reasons about hardware and measurements, a coder that implements
the plan, a debugger that repairs failures, a crossover agent and an initialiser. Each role has its own
temperature and model and its own context (``operators.llm.context``); prompts are the templates in ``prompts/``.

Replies that cannot be used (no code, truncated, not Python, no ModelNew, edits that do not apply) are reported
back to the same agent with the reason and retried, up to ``parse_retries`` times; they are never evaluated.
"""
from __future__ import annotations

import hashlib
import json
import string
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fitness.genome import Genome
from operators.base import CURRENT_CHILD
from operators.llm.context import ContextBuilder
from operators.llm.parsing import ParseError, apply_edits, extract_code, extract_plan, parse_edits

PROMPTS = Path(__file__).resolve().parent / "prompts"
EDIT_FORMATS = ("file", "diff")


def template(name: str) -> string.Template:
    return string.Template((PROMPTS / f"{name}.md").read_text())


@dataclass(frozen=True)
class RoleSettings:
    temperature: float | None = None  # None: the client's default
    model: str | None = None  # None: the client's default model


@dataclass
class TeamSettings:
    roles: dict = field(default_factory=dict)  # role name -> RoleSettings
    parse_retries: int = 2
    max_plan_steps: int = 4
    edit_format: str = "file"

    def __post_init__(self):
        if self.edit_format not in EDIT_FORMATS:
            raise ValueError(f"llm.edit_format must be one of {EDIT_FORMATS}, got {self.edit_format!r}")

    def role(self, name: str) -> RoleSettings:
        return self.roles.get(name, RoleSettings())


class LLMTeam:
    def __init__(self, client, context: ContextBuilder, settings: TeamSettings, policy: dict):
        self.client = client
        self.context = context
        self.settings = settings
        self._system = template("system")
        self._policy = policy
        self._samples: Counter = Counter()
        self._samples_lock = threading.Lock()

    # one exchange with one agent, retried while its reply cannot be used ---------------------------------------
    def _ask(self, role: str, prompt: str, parse):
        """Send `prompt` to the agent of `role`; `parse(reply)` turns its reply into the result or raises ParseError."""
        system = self._system.substitute(role=role, policy=self._policy.get("name", "?"),
                                         policy_description=self._policy.get("description", ""))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        settings = self.settings.role(role)
        sample = self._next_sample(messages)
        for attempt in range(self.settings.parse_retries + 1):
            reply = self.client.complete(messages, role=role, temperature=settings.temperature, model=settings.model,
                                         sample=sample)
            try:
                return parse(reply)
            except ParseError as exc:
                if attempt == self.settings.parse_retries:
                    raise
                messages += [{"role": "assistant", "content": reply.text},
                             {"role": "user", "content": f"Your reply could not be used: {exc}. Reply again, "
                                                         f"following the requested format exactly."}]

    def _next_sample(self, messages: list[dict]) -> int:
        """Which sample of this exact prompt this request is: its own cache entry. Each child (``CURRENT_CHILD``,
        set by the search for every child it makes) has its own samples, numbered by how often it asked the same
        prompt before; so two children asking the same prompt get independent replies, and a rerun makes the same
        requests whatever order concurrent children run in, replaying each from the cache."""
        child = CURRENT_CHILD.get()
        key = hashlib.sha256(json.dumps([child.id if child else "", messages], sort_keys=True).encode()).hexdigest()
        with self._samples_lock:
            repeat = self._samples[key]
            self._samples[key] += 1
        if child is None:
            return repeat
        return int(hashlib.sha256(child.id.encode()).hexdigest()[:8], 16) * 1000 + repeat

    @staticmethod
    def _code(reply) -> str:
        return extract_code(reply.text, reply.finish_reason)

    # the roles ---------------------------------------------------------------------------------------------------
    def plan(self, parent: Genome, parent_result, archive: tuple, lineage_notes: list[str]) -> str:
        context = self.context.build("planner", parent, parent_result, archive, lineage_notes)
        prompt = template("planner").substitute(max_steps=self.settings.max_plan_steps, context=context)
        return self._ask("planner", prompt, lambda reply: extract_plan(reply.text))

    def code(self, parent: Genome, plan: str) -> str:
        context = self.context.build("coder", parent)
        fmt = template(f"format_{self.settings.edit_format}").template
        prompt = template("coder").substitute(plan=plan or "(no plan: improve the kernel's speed as you see fit)",
                                              context=context, format_instructions=fmt)
        if self.settings.edit_format == "diff":
            base = parent.rendered()
            return self._ask("coder", prompt, lambda reply: apply_edits(base, parse_edits(reply.text)))
        return self._ask("coder", prompt, self._code)

    def debug(self, source: str, status: str, error: str, archive: tuple) -> str:
        context = self.context.build("debugger", archive=archive)
        prompt = template("debugger").substitute(status=status, error=error, source=source.strip(), context=context)
        return self._ask("debugger", prompt, self._code)

    def crossover(self, a: Genome, a_text: str, b: Genome, b_text: str) -> str:
        context = self.context.build("crossover")
        prompt = template("crossover").substitute(
            parent_a=f"{a_text}\n```python\n{a.rendered().strip()}\n```",
            parent_b=f"{b_text}\n```python\n{b.rendered().strip()}\n```", context=context)
        return self._ask("crossover", prompt, self._code)

    def initialise(self, seed: str | None = None, origin: str = "") -> str:
        """A first kernel: from the reference alone, or, given a `seed` kernel (made by `origin`), a faster
        rewrite of it."""
        context = self.context.build("initialiser")
        if seed is None:
            prompt = template("initialiser").substitute(context=context)
        else:
            prompt = template("initialiser_from_seed").substitute(context=context, seed=seed.strip(), origin=origin)
        return self._ask("initialiser", prompt, self._code)
