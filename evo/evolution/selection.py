"""Parent selection strategies, chosen in config (`search.selection._target_`).

Each is called with the current population, the archive of every individual evaluated so far in the run (the
tree memory), how many parents to pick and the search's RNG. Failed individuals are never picked while a correct
one is available.
"""
from __future__ import annotations

import random

from kernelevo.core.errors import KernelevoError


def _correct_or_all(individuals: list) -> list:
    return [ind for ind in individuals if ind.ok] or list(individuals)


def _time(ind) -> float:
    """What parents are chosen by: the individual's rank (``kernelevo.core.individual.ranked_by``: on a GPU its time)."""
    return ind.rank


class Tournament:
    """The best of `size` random individuals of the population (DEAP's selTournament, restricted to correct ones)."""

    def __init__(self, size: int = 2):
        if size < 1:
            raise KernelevoError(f"search.selection.size must be at least 1, got {size}")
        self.size = size

    def __call__(self, population: list, archive: list, k: int, rng: random.Random) -> list:
        pool = _correct_or_all(population)
        return [min(rng.sample(pool, min(self.size, len(pool))), key=_time) for _ in range(k)]


class EpsilonGreedy:
    """From the whole archive: the best kernel so far with probability 1 - epsilon, otherwise a random correct one."""

    def __init__(self, epsilon: float = 0.2):
        if not 0.0 <= epsilon <= 1.0:
            raise KernelevoError(f"search.selection.epsilon must be within [0, 1], got {epsilon}")
        self.epsilon = epsilon

    def __call__(self, population: list, archive: list, k: int, rng: random.Random) -> list:
        pool = _correct_or_all(archive or population)
        best = min(pool, key=_time)
        return [rng.choice(pool) if rng.random() < self.epsilon else best for _ in range(k)]


class UniformRandom:
    """Any correct individual of the population, uniformly (the 'random selection' ablation)."""

    def __call__(self, population: list, archive: list, k: int, rng: random.Random) -> list:
        pool = _correct_or_all(population)
        return [rng.choice(pool) for _ in range(k)]


class DistinctParents:
    """A strategy whose k > 1 parents (a crossover's) are distinct kernels whenever the population and archive hold
    two: a repeated pick is replaced by the fastest correct kernel not picked yet. With one strategy alone, a
    size-2 tournament over two individuals picks the same parent twice half the time, and a crossover of a kernel
    with itself gives nothing."""

    def __init__(self, select):
        self.select = select

    def __call__(self, population: list, archive: list, k: int, rng: random.Random) -> list:
        parents = list(self.select(population, archive, k, rng))
        for i in range(1, len(parents)):
            taken = {p.key for p in parents[:i]}
            if parents[i].key in taken:
                others = [ind for ind in _correct_or_all(list(population) + list(archive)) if ind.key not in taken]
                if others:
                    parents[i] = min(others, key=_time)
        return parents
