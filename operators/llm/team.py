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
from pathlib import Path

from kernelevo.core.genome import TUNABLE_NAME, Genome, GenomeError
from kernelevo.core.individual import Individual
from operators.base import CURRENT_CHILD
from operators.llm.context import Context, ContextBuilder
from operators.llm.figures import allowed_torch_text, measured_text, ran_where, tuning_text
from operators.llm.history import unified_diff
from operators.llm.edits import apply_edits, parse_edits
from operators.llm.parsing import ParseError, extract_code, extract_plan
from operators.llm.settings import TeamSettings

PROMPTS = Path(__file__).resolve().parent / "prompts"


def template(name: str) -> string.Template:
    return string.Template((PROMPTS / f"{name}.md").read_text())


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def siblings_text(rank: int = 1, independent: bool = False) -> str:
    """What the planner is told of the other children of its parent. Ranked (evolution, refinement, tree): this is
    the parent's `rank`-th child by this operator, counted over the whole search (``OperatorContext.rank``), so the
    k-th child of a parent plans the parent's k-th best idea: every rank asked once, and a new parent's best idea
    first. Past the first, the planner lists its ideas up to its rank (best first) and plans the last. Independent
    (sampling): no ranking, but each child's prompt names its attempt, so no two are the same request."""
    if independent:
        return (f"Children of this kernel are planned independently of each other from this same context; this is "
                f"attempt {rank}. Plan the change you expect to gain most on the target GPU.\n")
    which = ("plan the change with the largest expected gain on the target GPU" if rank == 1 else
             f"plan the change you rank {_ordinal(rank)} by expected gain on the target GPU (those ranked above it "
             f"were asked of its earlier children): first list your {rank} best ideas under `## Ideas`, one line "
             f"each, best first, then plan idea {rank}")
    return (f"Other children of this parent are planned from this same context, before, after or at the same time as "
            f"this one; so that they do not make the same kernel, its k-th child plans your k-th best idea. Yours "
            f"is {rank}: {which}.\n")


def _usable(source: str) -> str:
    """`source`, if its launch-parameter space is well formed; else a ParseError the agent is told."""
    try:
        Genome.from_source(source)
    except GenomeError as exc:
        raise ParseError("tunable", f"your module's {TUNABLE_NAME} is not usable: {exc}") from exc
    return source


class LLMTeam:
    def __init__(self, client, context: ContextBuilder, settings: TeamSettings, policy: dict, on_prompt=None,
                 tuner_trials: int | None = None):
        """`tuner_trials`: the tuner's trials per kernel on a GPU (``search.tuner.trials``), which the agents are
        told."""
        self.client = client
        self.tuner_trials = tuner_trials
        self.context = context
        self.settings = settings
        self._system = template("system")
        self._policy = policy
        self._samples: Counter = Counter()
        self._samples_lock = threading.Lock()
        self.on_prompt = on_prompt  # (role, characters, {part: characters}) for every prompt built: the run store

    # one exchange with one agent, retried while its reply cannot be used ---------------------------------------
    def _ask(self, role: str, prompt: str, parse, parts: dict):
        """Send `prompt` to the agent of `role`; `parse(reply)` turns its reply into the result or raises ParseError.
        `parts`: characters of the prompt taken by each named piece (context parts, template slots)."""
        system = self._system.substitute(role=role, policy=self._policy.get("name", "?"),
                                         policy_description=self._policy.get("description", ""),
                                         allowed_torch=allowed_torch_text(),
                                         tuning=tuning_text(self.context.target, self.tuner_trials))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        if self.on_prompt is not None:
            sizes = {"system": len(system), **parts, "instructions": len(prompt) - sum(parts.values())}
            self.on_prompt(role, len(system) + len(prompt), sizes)
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
        return _usable(extract_code(reply.text, reply.finish_reason))

    def _fill(self, name: str, context: Context, **slots) -> tuple[str, dict]:
        """The prompt of template `name`, and the characters each context part and slot takes in it."""
        prompt = template(name).substitute(context=context.text, **slots)
        return prompt, {**context.parts, **{slot: len(text) for slot, text in slots.items()}}

    # the roles ---------------------------------------------------------------------------------------------------
    def plan(self, parent: Individual, archive: tuple, duplicates: tuple = (), profiles: dict | None = None,
             attempts: tuple = (), rank: int = 1, independent: bool = False) -> str:
        """A plan for `parent`; `attempts`: a history of attempts to tell instead of the parent lineage's own (a
        refinement's, ``evo.evolution.strategy``); `rank`, `independent`: which child of the parent this is, and
        whether its children are independent samples (``siblings_text``)."""
        context = self.context.build("planner", parent, archive, duplicates, profiles, attempts)
        prompt, parts = self._fill("planner", context, max_steps=str(self.settings.max_plan_steps),
                                   siblings=siblings_text(rank, independent))
        return self._ask("planner", prompt, lambda reply: extract_plan(reply.text), parts)

    def code(self, parent: Individual, plan: str) -> str:
        context = self.context.build("coder", parent)
        fmt = template(f"format_{self.settings.edit_format}").template
        prompt, parts = self._fill("coder", context, format_instructions=fmt,
                                   plan=plan or "(no plan: improve the kernel's speed as you see fit)")
        if self.settings.edit_format == "diff":
            base = parent.genome.rendered()
            return self._ask("coder", prompt, lambda reply: _usable(apply_edits(base, parse_edits(reply.text))),
                             parts)
        return self._ask("coder", prompt, self._code, parts)

    def debug(self, source: str, result, parent: Individual, plan: str, archive: tuple,
              profiles: dict | None = None) -> str:
        """A repair of `source`, which failed with `result`: told the error (its failing line), where it ran, the
        plan it implements and its change against `parent`."""
        context = self.context.build("debugger", archive=archive, profiles=profiles)
        diff = unified_diff(parent.genome.rendered(), source, f"parent {parent.id}", "failing kernel")
        prompt, parts = self._fill("debugger", context, status=result.status, error=result.reason,
                                   where=ran_where(result, self.context.target), plan=plan.strip() or "(no plan)",
                                   diff=diff or "(no change)", source=source.strip())
        return self._ask("debugger", prompt, self._code, parts)

    def crossover(self, a: Individual, b: Individual, duplicates: tuple = ()) -> str:
        """A child combining `a` and `b`: `a` in full, `b` as a diff against it when that is shorter; told when an
        earlier reply for this child repeated an existing kernel (`duplicates`)."""
        context = self.context.build("crossover")
        code_a, code_b = a.genome.rendered().strip(), b.genome.rendered().strip()
        diff = unified_diff(code_a, code_b, f"parent A ({a.id})", f"parent B ({b.id})", max_lines=10 ** 6)
        figures = [measured_text(parent.result, self.context.target) for parent in (a, b)]
        parent_b = (f"{figures[1]}\nIts code, as a diff against parent A:\n```diff\n{diff}\n```"
                    if len(diff) < len(code_b) else f"{figures[1]}\n```python\n{code_b}\n```")
        again = ("\n\n## Already made\nYour earlier reply for this child repeated a kernel that already exists: "
                 "combine the parents differently.") if duplicates else ""
        prompt, parts = self._fill("crossover", context, parent_b=f"{b.id}: {parent_b}{again}",
                                   parent_a=f"{a.id}: {figures[0]}\n```python\n{code_a}\n```")
        return self._ask("crossover", prompt, self._code, parts)

    def initialise(self, seed: str | None = None, origin: str = "", measured=None) -> str:
        """A first kernel: from the reference alone, or, given a `seed` kernel (made by `origin`, with its
        `measured` result), a faster rewrite of it."""
        context = self.context.build("initialiser")
        if seed is None:
            prompt, parts = self._fill("initialiser", context)
        else:
            figures = measured_text(measured, self.context.target) if self.context.settings.enabled("profiling") \
                else ""
            prompt, parts = self._fill("initialiser_from_seed", context, seed=seed.strip(), origin=origin,
                                       measured=f"Measured: {figures}." if figures else "")
        return self._ask("initialiser", prompt, self._code, parts)
