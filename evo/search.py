"""The search loop: (mu + lambda) evolution of kernel individuals; the unit of work is one child.

    generation 0: the seeds (the seed first; a compiler seed brings Inductor's variants), each tuned
    generation g: for every child slot at once (``search.parallel`` in flight): select parents -> operator (LLM
                  calls included) -> tune (Optuna trials evaluated in parallel) -> record; then survivors ->
                  checkpoint

Everything a child does is a function of the run's seed, its generation and slot, and the state at the start of
its generation (populations, archive), never of timing: each slot draws from its own RNG; a child identical to a
kernel made before, or to the child of a lower slot of the same generation, is drawn again (a slot decides only
after the slots below it); the tuner tells Optuna its trials in the order it asked them. So the same config and
seed give the same lineage and best kernel for any number of workers or children in flight, given the same
measurements; and a killed run resumes from its last checkpoint by making the interrupted generation again, its
finished evaluations coming from the store.
"""
from __future__ import annotations

import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from random import Random

from deap import tools

from evo.selection import DistinctParents, Tournament
from evo.store import RunStore
from evo.toolbox import build_toolbox, statistics
from evo.tuner import Tuner
from fitness.genome import Genome
from fitness.individual import Individual, individual_id
from operators.base import CURRENT_CHILD, BudgetExhausted, ChildUsage, Operator, OperatorContext

ATTEMPTS_PER_CHILD = 20  # draws of (operator, parents) before a slot gives up finding a new child


@dataclass
class Budget:
    generations: int = 5
    max_evaluations: int | None = None
    wall_time_s: float | None = None
    patience: int | None = 3  # stop after this many generations without improvement

    def __post_init__(self):
        for name in ("generations", "max_evaluations", "wall_time_s", "patience"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"search.{name} must not be negative, got {value}")


@dataclass
class SearchSettings:
    mu: int = 4  # survivors per island
    lambda_: int = 8  # offspring per island and generation
    hall_of_fame: int = 5
    seed: int = 0
    islands: int = 1  # > 1: separate populations, the best migrating around a ring
    migration_interval: int = 2  # generations between migrations
    migration_size: int = 1  # individuals each island sends to the next
    parallel: int | None = None  # children in flight at once; None: every child of a generation
    budget: Budget = field(default_factory=Budget)

    def __post_init__(self):
        if self.mu < 1 or self.lambda_ < 1:
            raise ValueError(f"search.mu and search.lambda_ must be at least 1, got {self.mu}, {self.lambda_}")
        if self.islands < 1 or self.migration_interval < 1 or not 0 <= self.migration_size <= self.mu:
            raise ValueError(f"search.islands and search.migration_interval must be at least 1 and "
                             f"search.migration_size within [0, mu]; got {self.islands}, {self.migration_interval}, "
                             f"{self.migration_size}")
        if self.parallel is not None and self.parallel < 1:
            raise ValueError(f"search.parallel must be at least 1 (or null: every child at once), got "
                             f"{self.parallel}")

    @property
    def children_in_flight(self) -> int:
        return self.parallel or self.lambda_ * self.islands


@dataclass
class GenerationReport:
    generation: int
    evaluations: int
    best_s: float
    median_s: float
    correct: int
    size: int
    elapsed_s: float
    improved: bool


class Search:
    def __init__(self, seeds: list[tuple[Genome, str]], operators: list[Operator], tuner: Tuner, store: RunStore,
                 settings: SearchSettings, on_generation=None, selection=None, team=None):
        """`seeds`: generation 0's genomes and what made each (seed, inductor, inductor:<variant>, initialiser),
        the seed first: the kernel a run's speed-up over its seed is measured against."""
        if not operators:
            raise ValueError("the search needs at least one operator (operators.list is empty)")
        if not seeds:
            raise ValueError("the search needs a seed genome")
        self.seeds = seeds
        self.operators = operators
        self.tuner = tuner
        self.store = store
        self.settings = settings
        self.on_generation = on_generation or (lambda report: None)
        self.service = tuner.service
        self._children = ThreadPoolExecutor(settings.children_in_flight, thread_name_prefix="kernelevo-child")
        self.toolbox = build_toolbox(self._children.map, DistinctParents(selection or Tournament(2)))
        self.archive: list[Individual] = []  # every individual of the finished generations: the tree memory
        self.team = team  # the LLM agents, for LLM operators; None in an offline run
        self._exhausted = ""  # why an operator budget (LLM calls, cost) stopped the search
        self.stats = statistics()
        self.logbook = tools.Logbook()
        self.hall_of_fame = tools.HallOfFame(settings.hall_of_fame, similar=lambda a, b: a.key == b.key)
        self.generation, self.best_s = -1, math.inf  # for progress displays

    # children --------------------------------------------------------------------------------------------------
    def _vary(self, index: int, population: list, context: OperatorContext, decided: list[Future],
              seen: set) -> Individual | None:
        """A new child for slot `index`: drawn until it is neither a kernel made before nor a lower slot's child."""
        made, weights = None, [op.weight for op in self.operators]
        try:
            for attempt in range(ATTEMPTS_PER_CHILD):
                if self._exhausted:
                    break
                rng = Random(f"{self.settings.seed}:{context.generation}:{index}:{attempt}")
                operator = rng.choices(self.operators, weights=weights)[0]
                parents = self.toolbox.select_parents(population, context.archive, operator.arity, rng)
                try:
                    genomes = operator(parents, rng, context)
                except BudgetExhausted as exc:
                    self._exhausted, genomes = str(exc), []
                taken = seen | {key for slot in decided[:index] if (key := slot.result()) is not None}
                genome = next((g for g in genomes if g.key not in taken), None)
                if genome is None and genomes:  # a kernel made before: the next attempt is told, so it asks anew
                    context = replace(context, duplicates=(*context.duplicates,
                                                           genomes[0].note or f"{operator.name} child"))
                if genome is not None:
                    made = Individual(individual_id(context.generation, index), genome,
                                      parents=tuple(p.id for p in parents), operator=operator.name,
                                      generation=context.generation)
                    return made
            return None
        finally:
            decided[index].set_result(made.key if made is not None else None)

    def _child(self, index: int, population: list, context: OperatorContext, decided: list[Future],
               seen: set) -> Individual | None:
        """One child from parents to record: vary, tune, store."""
        usage = ChildUsage(individual_id(context.generation, index))
        token = CURRENT_CHILD.set(usage)
        try:
            child = self._vary(index, population, context, decided, seen)
        finally:
            CURRENT_CHILD.reset(token)
        if child is None:
            return None
        tuned = replace(self.tuner.tune(child), llm=usage.summary())
        self.store.add_individual(tuned)
        return tuned

    def _generation(self, generation: int, islands: list, seen: set) -> tuple[list, list, set]:
        """Every island's children, made concurrently: (offspring, owning island of each, keys now taken)."""
        context = OperatorContext(generation=generation, profile=self.service.profile, team=self.team,
                                  evaluate=lambda source: self.service.evaluate(source)[1],
                                  archive=tuple(self.archive), profile_kernel=self.service.profile_kernel)
        owners = [i for i in range(len(islands)) for _ in range(self.settings.lambda_)]
        decided = [Future() for _ in owners]
        made = list(self.toolbox.map(lambda n: self._child(n, islands[owners[n]], context, decided, seen),
                                     range(len(owners))))
        keys = {slot.result() for slot in decided} | {child.key for child in made if child is not None}
        return ([c for c in made if c is not None], [o for o, c in zip(owners, made) if c is not None],
                keys - {None})

    def _seeds(self) -> list[Individual]:
        """Generation 0: every seed tuned (concurrently), stored as 0.0, 0.1, ..."""
        def tuned(index: int) -> Individual:
            genome, made_by = self.seeds[index]
            ind = self.tuner.tune(Individual(individual_id(0, index), genome, operator=made_by, generation=0))
            self.store.add_individual(ind)
            return ind

        return list(self.toolbox.map(tuned, range(len(self.seeds))))

    def _survivors(self, islands: list, offspring: list, owners: list, generation: int) -> list:
        """Each island's best mu of its population and its children, one individual per kernel (a child that tuned
        to a kernel the island already holds adds nothing), then migration."""
        islands = [self.toolbox.select_survivors(_one_per_kernel(island + [ind for ind, o in zip(offspring, owners)
                                                                           if o == i]), self.settings.mu)
                   for i, island in enumerate(islands)]
        s = self.settings
        if s.islands > 1 and s.migration_size and generation % s.migration_interval == 0 and \
                all(len(island) >= s.migration_size for island in islands):
            tools.migRing(islands, s.migration_size, tools.selBest, replacement=tools.selWorst)
        return islands

    # the loop --------------------------------------------------------------------------------------------------
    def _out_of_budget(self, state: dict, started: float) -> str:
        budget = self.settings.budget
        if self._exhausted:
            return f"operator budget spent: {self._exhausted}"
        if state["generation"] >= budget.generations:  # generation 0 is the seed
            return f"{budget.generations} generations done"
        if budget.max_evaluations is not None and self.store.evaluation_count() >= budget.max_evaluations:
            return f"evaluation budget of {budget.max_evaluations} spent"
        if budget.wall_time_s is not None and self._elapsed(started) >= budget.wall_time_s:
            return f"wall-time budget of {budget.wall_time_s:g} s spent"
        if budget.patience is not None and state["stale"] >= budget.patience and state["generation"] > 0:
            return f"no improvement for {budget.patience} generations"
        return ""

    def _restore(self, state: dict) -> list:
        """The checkpoint's islands, archive, hall of fame and logbook (nothing made after it)."""
        self.archive = self.store.individuals(up_to_generation=state["generation"])
        by_id = {ind.id: ind for ind in self.archive}
        self.hall_of_fame.update([by_id[i] for i in state["hall_of_fame"]])
        for entry in state["logbook"]:
            self.logbook.record(**entry)
        self.generation, self.best_s = state["generation"], state["best_s"]
        return [[by_id[i] for i in island] for island in state["islands"]]

    def run(self) -> dict:
        """Run (or resume) to the end of the budget; returns the final state."""
        state = self.store.latest_checkpoint() or {"generation": -1, "elapsed_s": 0.0, "best_s": math.inf,
                                                   "stale": 0, "seen": []}
        self._resumed_elapsed, started = state["elapsed_s"], time.perf_counter()
        try:
            if state["generation"] < 0:
                seeds = self._seeds()
                self.archive = list(seeds)
                islands = [_one_per_kernel(seeds) for _ in range(self.settings.islands)]
                keys = {genome.key for genome, _ in self.seeds} | {seed.key for seed in seeds}
                state = self._advance(state, 0, islands, seeds, keys, started)
            else:
                islands = self._restore(state)
            seen = set(state["seen"])
            while not (stop := self._out_of_budget(state, started)):
                generation = state["generation"] + 1
                offspring, owners, keys = self._generation(generation, islands, seen)
                seen |= keys
                self.archive.extend(offspring)
                islands = self._survivors(islands, offspring, owners, generation)
                state = self._advance(state, generation, islands, offspring, seen, started)
        finally:
            self._children.shutdown(wait=True)
        state["stop_reason"] = stop
        self.store.set_meta("stop_reason", stop)
        return state

    def _elapsed(self, started: float) -> float:
        """Wall time of the whole run, across resumes."""
        return self._resumed_elapsed + time.perf_counter() - started

    def _advance(self, state: dict, generation: int, islands: list, offspring: list, seen: set,
                 started: float) -> dict:
        population = [ind for island in islands for ind in island]
        self.hall_of_fame.update(offspring)
        record = self.stats.compile(population)
        self.logbook.record(gen=generation, nevals=len(offspring), evaluations=self.store.evaluation_count(),
                            **record)
        improved = record["best"] < state["best_s"]
        elapsed = self._elapsed(started)
        new = {"generation": generation, "islands": [[ind.id for ind in island] for island in islands],
               "seen": sorted(seen), "best_s": min(record["best"], state["best_s"]),
               "stale": 0 if improved else state["stale"] + 1, "elapsed_s": elapsed, "logbook": list(self.logbook),
               "hall_of_fame": [ind.id for ind in self.hall_of_fame]}
        self.store.save_checkpoint(generation, new)
        self.generation, self.best_s = generation, new["best_s"]
        self.on_generation(GenerationReport(generation, self.store.evaluation_count(), record["best"],
                                            record["median"], record["correct"], len(population), elapsed, improved))
        return new


def _one_per_kernel(individuals: list) -> list:
    """The first individual of each kernel (key), in order: the population keeps the one it already had."""
    seen, unique = set(), []
    for ind in individuals:
        if ind.key not in seen:
            seen.add(ind.key)
            unique.append(ind)
    return unique
