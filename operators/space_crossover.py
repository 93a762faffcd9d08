"""SpaceCrossover: recombine two tunings of the same code.

Two genomes with the same ``structure`` are one kernel tuned (or given a space) differently. The child keeps that
code, declares the union of the parents' choices for every parameter (so whatever either lineage learned to offer
stays reachable) and takes each parameter's value from one parent or the other. Genomes with different code
cannot be mixed this way and give no child; an LLM crossover is the tool for those.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual
from operators.base import Operator, OperatorContext


def ordered_union(*lists: list) -> list:
    """The distinct values of the lists, sorted (first-seen order when the values do not compare)."""
    union = []
    for values in lists:
        union += [v for v in values if v not in union]
    try:
        return sorted(union)
    except TypeError:
        return union


def flip_one(picks: dict, a: Genome, b: Genome, differing: list[str], rng: random.Random) -> dict:
    """``picks`` with one parameter on which the parents disagree taken from the other parent."""
    name = rng.choice(differing)
    other = b.params[name] if picks[name] == a.params[name] else a.params[name]
    return {**picks, name: other}


@dataclass(frozen=True, kw_only=True)
class SpaceCrossover(Operator):
    """Same-structure parents -> union of their spaces, each parameter value from a random parent."""

    name: ClassVar[str] = "space_crossover"
    arity: ClassVar[int] = 2

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        a, b = self.check_arity(parents)
        if a.structure != b.structure or set(a.space) != set(b.space) or not a.space:
            return []
        space = {name: ordered_union(a.space[name], b.space[name]) for name in a.space}
        picks = {name: rng.choice([a.params[name], b.params[name]]) for name in space}
        if self.same_as_a_parent(space, picks, a, b):
            differing = [name for name in space if a.params[name] != b.params[name]]
            if not differing:
                return []
            picks = flip_one(picks, a, b, differing, rng)
            if self.same_as_a_parent(space, picks, a, b):
                return []
        return self.offspring(a.with_space(space).with_params(picks), parents)

    @staticmethod
    def same_as_a_parent(space: dict, params: dict, a: Genome, b: Genome) -> bool:
        """Whether (space, params) is a parent's, comparing choice lists as sets (order is not meaning)."""
        return any(params == p.params and all(space[k] == ordered_union(p.space[k]) for k in space) for p in (a, b))
