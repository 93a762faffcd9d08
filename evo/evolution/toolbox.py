"""DEAP set-up, in one place: the toolbox the search loop calls and the statistics of its logbook.

DEAP works on ``kernelevo.core.individual.Individual`` directly (its ``fitness`` is a DEAP fitness: the kernel's time,
minimised; infinite for a kernel that failed, so it ranks after every correct one).
"""
from __future__ import annotations

import math

from deap import base, tools

from kernelevo.core.stats import median


def build_toolbox(map_fn, select_parents) -> base.Toolbox:
    """`map_fn` runs children concurrently; `select_parents(population, archive, k, rng)` is a strategy from
    evo/evolution/selection.py."""
    toolbox = base.Toolbox()
    toolbox.register("map", map_fn)
    toolbox.register("select_parents", select_parents)
    toolbox.register("select_survivors", tools.selBest)
    return toolbox


def statistics() -> tools.Statistics:
    stats = tools.Statistics(key=lambda ind: ind.fitness.values[0])
    stats.register("best", lambda xs: min(xs))
    stats.register("median", median)  # the true median: the mean of the two middle times for an even count
    stats.register("correct", lambda xs: sum(1 for x in xs if math.isfinite(x)))
    return stats
