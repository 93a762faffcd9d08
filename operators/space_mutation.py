"""SpaceMutation: reshape the declared search space of a genome.

A seed's TUNABLE lists are a guess. This operator edits one of them (a numeric parameter whose choices are all
powers of two): it grows the list one step past its largest (x2) or smallest (/2) choice, so the tuner can reach
sizes the seed never offered, or drops an extreme choice, so tuning effort goes where it has paid off. New values
respect the hard bounds in ``hardware_profiles.limits.BOUNDS`` (and the profile's thread limit for NUM_WARPS); the
chosen value (and the source's default) is never dropped, and a list never becomes empty.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from kernelevo.core.genome import Genome, module_constants
from hardware_profiles import HardwareProfile
from kernelevo.core.individual import Individual
from hardware_profiles.limits import in_bounds
from operators.base import Operator, OperatorContext, is_power_of_two


def grow_up(name: str, choices: list[int], protected: set, profile: HardwareProfile | None) -> list[int] | None:
    top = max(choices) * 2
    return sorted([*choices, top]) if in_bounds(name, top, profile) else None


def grow_down(name: str, choices: list[int], protected: set, profile: HardwareProfile | None) -> list[int] | None:
    bottom = min(choices) // 2
    return sorted([*choices, bottom]) if bottom >= 1 and in_bounds(name, bottom, profile) else None


def drop_top(name: str, choices: list[int], protected: set, profile: HardwareProfile | None) -> list[int] | None:
    top = max(choices)
    return sorted(c for c in choices if c != top) if len(choices) > 1 and top not in protected else None


def drop_bottom(name: str, choices: list[int], protected: set, profile: HardwareProfile | None) -> list[int] | None:
    bottom = min(choices)
    return sorted(c for c in choices if c != bottom) if len(choices) > 1 and bottom not in protected else None


EDITS = (grow_up, grow_down, drop_top, drop_bottom)


def power_of_two_params(space: dict) -> list[str]:
    """Declared parameters whose choices are all (positive) powers of two."""
    return [name for name, choices in space.items() if choices and all(is_power_of_two(c) for c in choices)]


@dataclass(frozen=True, kw_only=True)
class SpaceMutation(Operator):
    """Extend one power-of-two parameter's choices by x2 / /2, or drop an unused extreme choice."""

    name: ClassVar[str] = "space_mutation"
    arity: ClassVar[int] = 1

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        (parent,) = self.check_arity(parents)
        defaults = module_constants(parent.source, parent.space)
        options = []  # (name, new choices) for every applicable edit
        for name in power_of_two_params(parent.space):
            protected = {parent.params.get(name), defaults.get(name)}
            choices = sorted(set(parent.space[name]))
            for edit in EDITS:
                new = edit(name, choices, protected, context.profile)
                if new is not None and new != parent.space[name]:
                    options.append((name, new))
        if not options:
            return []
        name, choices = rng.choice(options)
        child = parent.with_space({**parent.space, name: choices})
        return self.offspring(child, parents)
