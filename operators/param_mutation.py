"""ParamMutation: retune a genome inside its declared space.

The cheapest variation there is: the code stays as written, one or two declared parameters move to another of
their declared choices. Mostly to a neighbouring choice (sizes are listed in order, so a neighbour is a small step
that keeps what already worked), sometimes anywhere in the list (to escape a local optimum).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from kernelevo.core.errors import KernelevoError
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from operators.base import Operator, OperatorContext


def distinct_choices(choices: list) -> list:
    """The choices with repeats removed, in their declared order."""
    unique = []
    for choice in choices:
        if choice not in unique:
            unique.append(choice)
    return unique


def neighbour(choices: list, current, rng: random.Random):
    """A choice adjacent to ``current`` in the declared order (any choice if current is not among them)."""
    if current not in choices:
        return rng.choice(choices)
    index = choices.index(current)
    adjacent = [i for i in (index - 1, index + 1) if 0 <= i < len(choices)]
    return choices[rng.choice(adjacent)]


def elsewhere(choices: list, current, rng: random.Random):
    """Any choice other than ``current``."""
    return rng.choice([c for c in choices if c != current])


@dataclass(frozen=True, kw_only=True)
class ParamMutation(Operator):
    """Move 1..max_params declared parameters to another declared choice (adjacent with prob neighbour_prob)."""

    name: ClassVar[str] = "param_mutation"
    arity: ClassVar[int] = 1
    max_params: int = 2
    neighbour_prob: float = 0.7

    def __post_init__(self):
        super().__post_init__()
        if self.max_params < 1:
            raise KernelevoError(f"ParamMutation: max_params must be >= 1, got {self.max_params}")
        if not 0.0 <= self.neighbour_prob <= 1.0:
            raise KernelevoError(f"ParamMutation: neighbour_prob must be in [0, 1], got {self.neighbour_prob}")

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        (parent,) = self.check_arity(parents)
        movable = {k: distinct_choices(v) for k, v in parent.space.items() if len(distinct_choices(v)) > 1}
        if not movable:
            return []
        names = rng.sample(sorted(movable), rng.randint(1, min(self.max_params, len(movable))))
        params = {name: self.move(movable[name], parent.params.get(name), rng) for name in names}
        return self.offspring(parent.with_params(params), parents)

    def move(self, choices: list, current, rng: random.Random):
        step = neighbour if rng.random() < self.neighbour_prob else elsewhere
        return step(choices, current, rng)
