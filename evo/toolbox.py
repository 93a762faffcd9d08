"""DEAP set-up, in one place: the fitness and individual types, and the toolbox the search loop calls.

A kernel's fitness is its median time (minimised); an individual that failed (any status but ok) has an
infinite time, so it ranks after every correct one and is never picked as a parent while a correct one exists.
"""
from __future__ import annotations

import math

from deap import base, creator, tools

from evo.genome import Genome


class Candidate:
    """What DEAP's Individual wraps: a tuned genome and the evaluation that scored it."""

    def __init__(self, genome: Genome, eval_key: str = "", status: str = "", reason: str = "", origin_id: str = ""):
        self.genome = genome
        self.origin_id = origin_id or genome.id  # the genome as the operator made it, before tuning
        self.eval_key = eval_key
        self.status = status
        self.reason = reason

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _ensure_types() -> None:
    if not hasattr(creator, "KernelFitness"):
        creator.create("KernelFitness", base.Fitness, weights=(-1.0,))
    if not hasattr(creator, "KernelIndividual"):
        creator.create("KernelIndividual", Candidate, fitness=creator.KernelFitness)


def make_individual(genome: Genome, eval_key: str, status: str, time_s: float | None, reason: str = "",
                    origin_id: str = ""):
    _ensure_types()
    individual = creator.KernelIndividual(genome, eval_key, status, reason, origin_id)
    individual.fitness.values = (time_s if status == "ok" and time_s is not None else math.inf,)
    return individual


def build_toolbox(map_fn, select_parents) -> base.Toolbox:
    """`select_parents(population, archive, k, rng)` is a strategy from evo/selection.py."""
    _ensure_types()
    toolbox = base.Toolbox()
    toolbox.register("map", map_fn)
    toolbox.register("select_parents", select_parents)
    toolbox.register("select_survivors", tools.selBest)
    return toolbox


def statistics() -> tools.Statistics:
    stats = tools.Statistics(key=lambda ind: ind.fitness.values[0])
    stats.register("best", lambda xs: min(xs))
    stats.register("median", lambda xs: sorted(xs)[len(xs) // 2])
    stats.register("correct", lambda xs: sum(1 for x in xs if math.isfinite(x)))
    return stats
