"""The operator interface, plus the value bounds the offline operators share.

An operator takes ``arity`` parent individuals (``kernelevo.core.individual.Individual``: code, tuned parameters,
measured result, lineage) and returns zero or more child genomes; the search gives each child its lineage (parent ids,
operator name, generation). An operator that has nothing meaningful to offer returns ``[]`` rather than a copy of a
parent: the search dedupes by ``Genome.key``, so a no-op child would only waste a slot.

Many children are made at once, each in its own thread: ``CURRENT_CHILD`` tells code below the operator (the LLM
client's recorder, the team's sample numbering) which child it works for, so usage is attributed and replies are
numbered the same way whatever the order in which children run.

Operators are small frozen dataclasses built from keyword arguments (Hydra ``_target_`` + kwargs), so they pickle
and compare by value; all their randomness comes from the ``rng`` they are handed, so a fixed seed replays a run.
"""
from __future__ import annotations

import random
from abc import ABC, abstractmethod
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

from kernelevo.core.errors import KernelevoError
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from hardware_profiles import HardwareProfile
from hardware_profiles.limits import in_bounds


@dataclass(frozen=True)
class OperatorContext:
    generation: int  # generation the children belong to
    profile: HardwareProfile | None = None  # device facts (max_threads_per_block, ...); None when unknown
    team: Any = None  # the LLM agents (operators.llm.team.LLMTeam); None in an offline run
    evaluate: Callable | None = None  # source -> EvalResult, through the run's evaluation cache (the debugger's loop)
    archive: tuple = ()  # every individual of the generations before this one (tree memory)
    duplicates: tuple = ()  # this child's earlier attempts that made a kernel which already existed (Duplicate)
    attempts: tuple = ()  # the history of attempts to tell the LLM (a refinement's lineage); (): the parent's own
    profile_kernel: Callable | None = None  # source -> profiler record (fitness.profile), kept in the run store
    rank: int = 1  # this child is the rank-th its operator makes from these parents, over the whole search
    independent: bool = False  # the strategy's children are independent samples (sampling): no ranking of ideas
    # called once the child has reserved what it needs (its LLM calls), or found it cannot: the children after it
    # reserve after it, so the budget's last calls go to the children in their order (evo.evolution.ranks)
    reserved: Callable = lambda: None

    def duplicates_of(self, operator: str) -> tuple:
        """The notes of this child's earlier attempts by `operator` that made an existing kernel: what an agent is
        told it made itself (another operator's attempts are not its own)."""
        return tuple(d.note for d in self.duplicates if d.operator == operator)


@dataclass(frozen=True)
class Duplicate:
    """An earlier attempt of a child that made a kernel which already existed: the operator that made it (by name)
    and the note of its genome (an LLM mutation's plan)."""

    operator: str
    note: str = ""


@dataclass
class ChildUsage:
    """The child an operator call works for, and the LLM usage charged to it."""

    id: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def charge(self, call: dict) -> None:
        if call.get("cached"):
            return
        self.calls += 1
        self.prompt_tokens += call.get("prompt_tokens") or 0
        self.completion_tokens += call.get("completion_tokens") or 0
        self.cost_usd += call.get("cost_usd") or 0.0

    def summary(self) -> dict:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd} if self.calls else {}


CURRENT_CHILD: ContextVar[ChildUsage | None] = ContextVar("kernelevo_current_child", default=None)


class BudgetExhausted(Exception):
    """An operator's budget (LLM calls or cost) is spent: the search finishes the generation and stops."""


class OperatorUnavailable(Exception):
    """What an operator needs is gone (its LLM, after too many failed calls in a row): the search stops at once, the
    children not yet folded in dropped, to be made again on resume; the message, the stop reason, names the cause."""


@dataclass(frozen=True, kw_only=True)
class Operator(ABC):
    name: ClassVar[str]  # short, recorded as Individual.operator in the lineage
    arity: ClassVar[int]  # number of parents consumed: 1 for a mutation, 2 for a crossover
    weight: float = 1.0  # relative probability that the search applies it

    def __post_init__(self):
        if not self.weight >= 0:
            raise KernelevoError(f"{type(self).__name__}: weight must be >= 0, got {self.weight!r}")

    @abstractmethod
    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        """Child genomes of ``parents`` (exactly ``arity`` of them); ``[]`` when no meaningful child exists."""

    def check_arity(self, parents: list[Individual]) -> list[Genome]:
        """The parents' genomes, after checking there are as many as the operator takes."""
        if len(parents) != self.arity:
            raise ValueError(f"{self.name} takes {self.arity} parent(s), got {len(parents)}")
        return [p.genome for p in parents]

    @staticmethod
    def offspring(child: Genome | None, parents: list[Individual]) -> list[Genome]:
        """``[child]``, or ``[]`` when there is none or it is the same code and params as a parent."""
        return [] if child is None or child.key in {p.key for p in parents} else [child]


def is_int(value) -> bool:
    """A plain int (bool is an int subclass but not a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_power_of_two(value) -> bool:
    return is_int(value) and value > 0 and value & (value - 1) == 0


def halved_and_doubled(name: str, value: int, profile: HardwareProfile | None = None) -> list[int]:
    """value // 2 and value * 2, those within bounds and different from value."""
    moves = [value // 2, value * 2]
    return [v for v in moves if v != value and v >= 1 and in_bounds(name, v, profile)]
