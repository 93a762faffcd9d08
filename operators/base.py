"""The operator interface, plus the value bounds the offline operators share.

An operator takes ``arity`` parent genomes and returns zero or more children. Children carry their lineage
(parent ids, operator name, generation). An operator that has nothing meaningful to offer returns ``[]`` rather
than a copy of a parent: the search dedupes by ``Genome.id``, so a no-op child would only waste a slot.

Operators are small frozen dataclasses built from keyword arguments (Hydra ``_target_`` + kwargs), so they pickle
and compare by value; all their randomness comes from the ``rng`` they are handed, so a fixed seed replays a run.
"""
from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar

from evo.genome import Genome
from hardware_profiles import HardwareProfile


@dataclass(frozen=True)
class OperatorContext:
    generation: int  # generation the children belong to
    profile: HardwareProfile | None = None  # device facts (max_threads_per_block, ...); None when unknown
    team: Any = None  # the LLM agents (operators.llm.team.LLMTeam); None in an offline run
    evaluate: Callable | None = None  # source -> EvalResult, through the run's evaluation cache (the debugger's loop)
    lookup: Callable | None = None  # genome -> its EvalResult, if it was evaluated
    archive: tuple = ()  # every individual evaluated so far (tree memory)


class BudgetExhausted(Exception):
    """An operator's budget (LLM calls or cost) is spent: the search finishes the generation and stops."""


@dataclass(frozen=True, kw_only=True)
class Operator(ABC):
    name: ClassVar[str]  # short, recorded as Genome.operator in the lineage
    arity: ClassVar[int]  # number of parents consumed: 1 for a mutation, 2 for a crossover
    weight: float = 1.0  # relative probability that the search applies it

    def __post_init__(self):
        if not self.weight >= 0:
            raise ValueError(f"{type(self).__name__}: weight must be >= 0, got {self.weight!r}")

    @abstractmethod
    def __call__(self, parents: list[Genome], rng: random.Random, context: OperatorContext) -> list[Genome]:
        """Children of ``parents`` (exactly ``arity`` of them); ``[]`` when no meaningful child exists."""

    def check_arity(self, parents: list[Genome]) -> None:
        if len(parents) != self.arity:
            raise ValueError(f"{self.name} takes {self.arity} parent(s), got {len(parents)}")

    def lineage(self, parents: list[Genome], context: OperatorContext) -> dict:
        """The lineage fields a child of ``parents`` made by this operator carries."""
        return {"parents": tuple(p.id for p in parents), "operator": self.name, "generation": context.generation}

    def offspring(self, child: Genome, parents: list[Genome], context: OperatorContext) -> list[Genome]:
        """``[child]`` stamped with lineage, or ``[]`` when it is the same code and params as a parent."""
        child = replace(child, **self.lineage(parents, context))
        return [] if child.id in {p.id for p in parents} else [child]


# Hard bounds on integer launch/tile values, by name. First matching pattern wins (searched in the upper-cased
# name, so a `num_warps=` keyword matches NUM_WARPS); names matching none get DEFAULT_BOUNDS.
BOUNDS: tuple[tuple[str, int, int], ...] = (
    ("NUM_WARPS", 1, 32),  # further capped by the profile's max_threads_per_block / 32
    ("NUM_STAGES", 1, 8),  # software-pipelining depth
    ("BLOCK_K", 16, 65536),  # the reduction tile of tl.dot must be >= 16
    ("BLOCK|TILE", 16, 65536),  # other tile sizes
)
DEFAULT_BOUNDS = (1, 65536)
WARP_SIZE = 32


def value_bounds(name: str, profile: HardwareProfile | None = None) -> tuple[int, int]:
    """The inclusive (low, high) range a value of the named knob may take."""
    key = name.upper()
    low, high = next(((lo, hi) for pattern, lo, hi in BOUNDS if re.search(pattern, key)), DEFAULT_BOUNDS)
    if profile is not None and "NUM_WARPS" in key:
        high = min(high, profile.max_threads_per_block // WARP_SIZE)
    return low, high


def in_bounds(name: str, value: int, profile: HardwareProfile | None = None) -> bool:
    low, high = value_bounds(name, profile)
    return low <= value <= high


def is_int(value) -> bool:
    """A plain int (bool is an int subclass but not a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_power_of_two(value) -> bool:
    return is_int(value) and value > 0 and value & (value - 1) == 0


def halved_and_doubled(name: str, value: int, profile: HardwareProfile | None = None) -> list[int]:
    """value // 2 and value * 2, those within bounds and different from value."""
    moves = [value // 2, value * 2]
    return [v for v in moves if v != value and v >= 1 and in_bounds(name, v, profile)]
