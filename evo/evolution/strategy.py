"""Search strategies, chosen in config (`search/strategy=...`, ``search.strategy._target_``): what each child is made
from and what its operator is told, inside the one steady-state loop (``evo.evolution.loop``, ``evo.evolution.search``)
with the same operators, tuner, evaluator and budgets.

* ``evolution``: (mu + lambda) with islands: parents by the selection plug-in from the child's island (the default).
* ``sampling``: best-of-N: every child an independent child of the seed (the fastest correct kernel of generation
  0); its operator is told nothing of the other children. The best is kept.
* ``refinement``: one lineage, Reflexion-style: every child from the current best kernel, its LLM operator told
  the history of every attempt so far (``OperatorContext.attempts``).
* ``tree``: STARK's strategic search (arXiv 2510.16996): every attempt a node of one tree, the node to expand chosen
  by adaptive epsilon-greedy over the whole tree, epsilon decaying with the attempts made; the LLM team's
  plan/code/debug roles as in any run.

A strategy is a function of the state a child is made from (the window's archive and islands, ``evo.evolution.loop``)
and of the child's own RNG: it keeps no state of its own, so lineage is the same for any number of children in flight
and a resumed run continues as one never killed. Sampling and refinement make each child from one parent: operators
of more parents (crossovers) are left out; an operator list with none of one parent is an error.
"""
from __future__ import annotations

import random
from dataclasses import replace

from kernelevo.core.errors import KernelevoError
from evo.evolution.selection import DistinctParents, EpsilonGreedy


def _fastest(individuals) -> object:
    """The best correct individual by the search's ranking (``kernelevo.core.individual.ranked_by``: on a GPU the
    fastest; the
    first of equals), or the first when none is correct."""
    correct = [ind for ind in individuals if ind.ok]
    return min(correct, key=lambda ind: ind.rank) if correct else individuals[0]


class Evolution:
    """Today's (mu + lambda) with islands: parents chosen by ``search.selection`` from the child's island."""

    name = "evolution"
    one_parent = False  # whether each child is made from one parent (operators of more are left out)
    independent = False  # whether its children are independent samples: no ranking of ideas (OperatorContext)

    def check(self, settings):
        """The search settings this strategy runs with (KernelevoError for those it cannot)."""
        return settings

    def parents(self, select, population: list, archive: tuple, arity: int, rng: random.Random) -> list:
        """`arity` parents for a child; `select` is the selection plug-in (population, archive, k, rng)."""
        return select(population, archive, arity, rng)

    def told(self, archive: tuple) -> tuple:
        """What the child's operator sees of the search (``OperatorContext.archive``)."""
        return archive

    def attempts(self, archive: tuple) -> tuple:
        """The history of attempts its LLM operator is told (``OperatorContext.attempts``); () for the lineage's own."""
        return ()

    def usable(self, operators: list) -> list:
        """The operators this strategy applies; KernelevoError when none is left."""
        kept = [op for op in operators if op.arity == 1] if self.one_parent else list(operators)
        if not kept:
            raise KernelevoError(f"search/strategy={self.name} makes each child from one parent, and operators.list "
                                 f"has no operator of one parent (only crossovers): add a mutation, e.g. "
                                 f"operators=offline")
        return kept


class _OnePopulation(Evolution):
    def check(self, settings):
        if settings.islands != 1:
            raise KernelevoError(f"search/strategy={self.name} keeps no islands, got "
                                 f"search.islands={settings.islands}: set search.islands=1, or use "
                                 f"search/strategy=evolution")
        return settings


class Sampling(_OnePopulation):
    """Best-of-N: independent children of the seed, each told only of generation 0."""

    name = "sampling"
    one_parent = True
    independent = True

    def parents(self, select, population, archive, arity, rng):
        return [_fastest([ind for ind in archive if ind.generation == 0])]

    def told(self, archive):
        return tuple(ind for ind in archive if ind.generation == 0)


class Refinement(_OnePopulation):
    """One lineage: each child from the current best, its LLM operator told every attempt so far (Reflexion-style).
    `staleness`: the children a child may not see before it is made (1: each sees every attempt before it, one child
    at a time, as Reflexion; null: search.staleness)."""

    name = "refinement"
    one_parent = True

    def __init__(self, staleness: int | None = 1):
        if staleness is not None and staleness < 1:
            raise KernelevoError(f"search.strategy.staleness must be at least 1 (or null), got {staleness}")
        self.staleness = staleness

    def check(self, settings):
        settings = super().check(settings)
        return settings if self.staleness is None else replace(settings, staleness=self.staleness)

    def parents(self, select, population, archive, arity, rng):
        return [_fastest(list(archive))]

    def attempts(self, archive):
        return tuple(ind for ind in archive if ind.generation > 0)


class Tree(_OnePopulation):
    """STARK's tree: the node to expand is the fastest correct one with probability 1 - epsilon, else a random
    correct one, over every node of the tree (the whole archive); epsilon = max(min_epsilon, epsilon x decay ^
    attempts), attempts being the children folded into the state the child is made from."""

    name = "tree"

    def __init__(self, epsilon: float = 0.6, decay: float = 0.95, min_epsilon: float = 0.05):
        if not 0.0 <= min_epsilon <= epsilon <= 1.0 or not 0.0 < decay <= 1.0:
            raise KernelevoError(f"search.strategy needs 0 <= min_epsilon <= epsilon <= 1 and 0 < decay <= 1, got "
                                 f"epsilon={epsilon}, decay={decay}, min_epsilon={min_epsilon}")
        self.epsilon, self.decay, self.min_epsilon = epsilon, decay, min_epsilon

    def epsilon_after(self, attempts: int) -> float:
        return max(self.min_epsilon, self.epsilon * self.decay ** attempts)

    def parents(self, select, population, archive, arity, rng):
        attempts = sum(1 for ind in archive if ind.generation > 0)
        pick = DistinctParents(EpsilonGreedy(self.epsilon_after(attempts)))
        return pick(list(archive), list(archive), arity, rng)
