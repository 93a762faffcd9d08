"""When a search stops, one rule: the budgets (``evo.evolution.search.Budget``) against the search's state. The search
asks it before every child (``Search._ended``, ``Search._spent``); a resume asks it of the checkpoint it would start
from (``kernelevo.resuming``), so it refuses budgets that would start no child for the reasons the search would give.

Each stop names the budget's key (`generations`, `patience`, `max_evaluations`, `max_gpu_s`, `wall_time_s`, all
under ``search.``) and what was spent against it, for a message on how to lift it.
"""
from __future__ import annotations

from dataclasses import dataclass

WALL_TIME = "wall-time budget"  # how a stop by search.wall_time_s begins (evo.reports.outcome.over_budget reads it)


@dataclass(frozen=True)
class Stop:
    key: str  # the budget: generations, patience, max_evaluations, max_gpu_s, wall_time_s (under search.)
    reason: str  # as the run says it ("5 generations done")
    spent: float  # what was spent against the budget: generations, stale generations, evaluations, seconds


def _generations(n: int) -> str:
    return f"{n} generation" + ("" if n == 1 else "s")


def ended(budget, next_generation: int, generation: int, stale: int) -> list[Stop]:
    """The budgets on generations that end the search before a child of `next_generation`, given the last whole
    generation folded in and how many generations in a row brought no improvement (the same whatever the timing)."""
    stops = []
    if next_generation > budget.generations:  # generation 0 is the seed
        stops.append(Stop("generations", f"{_generations(budget.generations)} done", next_generation - 1))
    if budget.patience is not None and stale >= budget.patience and generation > 0:
        stops.append(Stop("patience", f"no improvement for {_generations(budget.patience)}", stale))
    return stops


def spent(budget, store, elapsed_s: float) -> list[Stop]:
    """The resource budgets spent: no child starts any more. `store`: the run's (``evo.records.store.RunStore``: its
    evaluation count and seconds, read only when a budget needs them); `elapsed_s`: the search's wall time."""
    stops = []
    if budget.max_evaluations is not None and (done := store.evaluation_count()) >= budget.max_evaluations:
        stops.append(Stop("max_evaluations", f"evaluation budget of {budget.max_evaluations} spent", done))
    if budget.max_gpu_s is not None and (seconds := store.evaluation_seconds()) >= budget.max_gpu_s:
        stops.append(Stop("max_gpu_s", f"evaluation-seconds budget of {budget.max_gpu_s:g} s spent", seconds))
    if budget.wall_time_s is not None and elapsed_s >= budget.wall_time_s:
        stops.append(Stop("wall_time_s", f"{WALL_TIME} of {budget.wall_time_s:g} s spent", elapsed_s))
    return stops
