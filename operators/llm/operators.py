"""The LLM operators the search applies: a plan -> code -> debug mutation, and an LLM crossover.

They reach the agents through ``OperatorContext.team`` (built from the `llm` config) and evaluate through
``OperatorContext.evaluate`` (the run's evaluation cache, so the debugger's attempts are never evaluated twice).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from fitness.genome import Genome, GenomeError
from fitness.individual import Individual
from operators.base import BudgetExhausted, Operator, OperatorContext
from operators.llm.context import profiling_text
from operators.llm.parsing import ParseError

REPAIRABLE = ("compile_error", "runtime_error", "incorrect")


def _team(context: OperatorContext):
    if context.team is None:
        raise ValueError("LLM operators need an LLM: choose one with llm=<preset> (see conf/llm/), or use "
                         "operators=offline")
    return context.team


def _lineage_notes(parent: Individual, context: OperatorContext) -> list[str]:
    """Tree memory: what children of this parent (and of its ancestors) were tried, and how they did."""
    ancestry = {parent.id, *parent.parents}
    notes = []
    for ind in context.archive:
        if set(ind.parents) & ancestry and ind.note:
            outcome = "ok" if ind.ok else ind.status
            notes.append(f"{ind.operator}: {ind.note.splitlines()[0][:200]} -> {outcome}")
    return notes[-8:] + [f"{note.splitlines()[0][:200]} -> made a kernel that already exists: propose a different "
                         f"change" for note in context.duplicates]


def _budget_guard(call):
    """Turn an LLM budget stop into the search's BudgetExhausted, and unusable replies into no child."""
    from operators.llm.client import LLMBudgetExceeded, LLMError

    try:
        return call()
    except LLMBudgetExceeded as exc:
        raise BudgetExhausted(str(exc)) from exc
    except (ParseError, LLMError, GenomeError):
        return None


@dataclass(frozen=True, kw_only=True)
class LLMMutation(Operator):
    """Planner -> coder -> debugger (up to `debug_tries` repairs) on one parent."""

    name: ClassVar[str] = "llm_mutation"
    arity: ClassVar[int] = 1
    use_planner: bool = True
    debug_tries: int = 2

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        (genome,) = self.check_arity(parents)
        team, parent = _team(context), parents[0]
        plan = ""
        if self.use_planner:
            plan = _budget_guard(lambda: team.plan(genome, parent.result, context.archive,
                                                   _lineage_notes(parent, context)))
            if plan is None:
                return []
        if not self.use_planner and context.duplicates:  # no planner to tell: the coder is told instead
            plan = "Your earlier change gave a kernel that already exists; make a different change."
        source = _budget_guard(lambda: team.code(genome, plan))
        if source is None:
            return []
        source = self._repair(team, source, context)
        child = _budget_guard(lambda: Genome.from_source(source, note=plan))
        return [child] if child is not None else []  # a copy of a kernel is the search's to catch: it tells the LLM

    def _repair(self, team, source: str, context: OperatorContext) -> str:
        for _ in range(self.debug_tries if context.evaluate else 0):
            outcome = context.evaluate(source)
            if outcome.status not in REPAIRABLE:
                break
            fixed = _budget_guard(lambda: team.debug(source, outcome.status, outcome.reason, context.archive))
            if fixed is None:
                break
            source = fixed
        return source


@dataclass(frozen=True, kw_only=True)
class LLMCrossover(Operator):
    """Two correct parents, one child that combines their ideas."""

    name: ClassVar[str] = "llm_crossover"
    arity: ClassVar[int] = 2

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        a, b = self.check_arity(parents)
        team = _team(context)
        if a.key == b.key:
            return []
        figures = [profiling_text(p.result) for p in parents]
        source = _budget_guard(lambda: team.crossover(a, figures[0], b, figures[1]))
        child = _budget_guard(lambda: Genome.from_source(source, note="crossover")) if source else None
        return self.offspring(child, parents)
