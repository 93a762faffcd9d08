"""The search loop: (mu + lambda) evolution of kernel genomes, with Optuna tuning inside each individual.

    seed genome -> initial population -> [select parents -> operators -> offspring -> tune + evaluate (toolbox.map)
    -> survivors -> checkpoint] x generations

The state after every generation (population, hall of fame, logbook, RNG, counters) is one checkpoint row in the
run store; every evaluation is stored as it finishes. ``Search.run`` on a store with a checkpoint resumes from it:
the RNG is restored, so the interrupted generation's offspring are generated again identically, and their
evaluations come from the store instead of being repeated.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

from deap import tools

from evo.genome import Genome, evaluation_key
from evo.store import RunStore
from evo.toolbox import build_toolbox, make_individual, statistics
from evo.selection import Tournament
from evo.tuner import Tuner
from operators.base import BudgetExhausted, Operator, OperatorContext


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
    budget: Budget = field(default_factory=Budget)

    def __post_init__(self):
        if self.mu < 1 or self.lambda_ < 1:
            raise ValueError(f"search.mu and search.lambda_ must be at least 1, got {self.mu}, {self.lambda_}")
        if self.islands < 1 or self.migration_interval < 1 or not 0 <= self.migration_size <= self.mu:
            raise ValueError(f"search.islands and search.migration_interval must be at least 1 and "
                             f"search.migration_size within [0, mu]; got {self.islands}, {self.migration_interval}, "
                             f"{self.migration_size}")


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
    def __init__(self, seed_genome: Genome, operators: list[Operator], tuner: Tuner, store: RunStore,
                 settings: SearchSettings, on_generation=None, selection=None, team=None):
        if not operators:
            raise ValueError("the search needs at least one operator (operators.list is empty)")
        self.seed_genome = seed_genome
        self.operators = operators
        self.tuner = tuner
        self.store = store
        self.settings = settings
        self.on_generation = on_generation or (lambda report: None)
        self.service = tuner.service
        self.toolbox = build_toolbox(self.service.map, selection or Tournament(2))
        self.archive: list = []  # every individual evaluated in this run: the tree memory selection may draw on
        self.team = team  # the LLM agents, for LLM operators; None in an offline run
        self._exhausted = ""  # why an operator budget (LLM calls, cost) stopped the search
        self.stats = statistics()
        self.logbook = tools.Logbook()
        self.hall_of_fame = tools.HallOfFame(settings.hall_of_fame, similar=lambda a, b: a.genome.id == b.genome.id)

    # state -----------------------------------------------------------------------------------------------------
    def _fresh_state(self) -> dict:
        return {"generation": -1, "population": [], "hall_of_fame": [], "seen": [], "logbook": [],
                "best_s": math.inf, "stale": 0, "elapsed_s": 0.0,
                "rng": random.Random(self.settings.seed).getstate()}

    def _individual(self, record: dict):
        genome = self.store.genome(record["genome_id"]).with_params(record["params"])
        return make_individual(genome, record["eval_key"], record["status"], record["time_s"], record["reason"],
                               origin_id=record["genome_id"])

    def _restore(self, ids: list) -> list:
        by_id = {r["genome_id"]: r for r in self.store.individuals()}
        return [self._individual(by_id[gid]) for gid in ids]

    # variation and evaluation ----------------------------------------------------------------------------------
    def _tune(self, genome: Genome):
        """Tune one genome and record it: the unit of work toolbox.map spreads over the evaluators."""
        self.store.add_genome(genome)
        tuned = self.tuner.tune(genome)
        self.store.set_individual(genome.id, genome.generation, tuned.result.status, tuned.result.time_s,
                                  tuned.genome.params, tuned.key, tuned.result.reason[:500])
        return make_individual(tuned.genome, tuned.key, tuned.result.status, tuned.result.time_s, tuned.result.reason,
                               origin_id=genome.id)

    def _lookup(self, genome: Genome):
        return self.store.evaluation(evaluation_key(genome.rendered()))

    def _context(self, generation: int) -> OperatorContext:
        return OperatorContext(generation=generation, profile=self.service.profile, team=self.team,
                               evaluate=lambda source: self.service.evaluate(source)[1], lookup=self._lookup,
                               archive=tuple(self.archive))

    def _offspring(self, population: list, rng: random.Random, seen: set, generation: int, count: int) -> list:
        context = self._context(generation)
        weights = [op.weight for op in self.operators]
        children, attempts = [], 0
        while len(children) < count and attempts < 20 * count and not self._exhausted:
            attempts += 1
            operator = rng.choices(self.operators, weights=weights)[0]
            parents = self.toolbox.select_parents(population, self.archive, operator.arity, rng)
            try:
                made = operator([p.genome for p in parents], rng, context)
            except BudgetExhausted as exc:
                self._exhausted = str(exc)
                made = []
            for child in made:
                if child.id not in seen and len(children) < count:
                    seen.add(child.id)
                    children.append(child)
        return children

    def _initial_genomes(self, rng: random.Random, seen: set) -> list[Genome]:
        """The seed (once, on the first island) and mu - 1 variations of it."""
        seed = self.seed_genome
        first = seed.id not in seen
        seen.add(seed.id)
        population = [make_individual(seed, "", "ok", 1.0)]  # a stand-in parent for the first variations
        return ([seed] if first else []) + self._offspring(population, rng, seen, 0, self.settings.mu - 1)

    def _variation(self, islands: list, rng: random.Random, seen: set, generation: int) -> tuple[list, list]:
        """Offspring genomes of every island, and the island each belongs to."""
        genomes, owners = [], []
        for index, island in enumerate(islands):
            made = (self._initial_genomes(rng, seen) if not island else
                    self._offspring(island, rng, seen, generation, self.settings.lambda_))
            genomes += made
            owners += [index] * len(made)
        return genomes, owners

    def _survivors(self, islands: list, offspring: list, owners: list, generation: int) -> list:
        islands = [self.toolbox.select_survivors(island + [ind for ind, o in zip(offspring, owners) if o == i],
                                                 self.settings.mu) for i, island in enumerate(islands)]
        s = self.settings
        if s.islands > 1 and s.migration_size and generation % s.migration_interval == 0 and \
                all(len(island) >= s.migration_size for island in islands):
            tools.migRing(islands, s.migration_size, tools.selBest, replacement=tools.selWorst)
        return islands

    # the loop --------------------------------------------------------------------------------------------------
    def _out_of_budget(self, state: dict, started: float) -> str:
        budget = self.settings.budget
        elapsed = self._elapsed(started)
        if self._exhausted:
            return f"operator budget spent: {self._exhausted}"
        if state["generation"] >= budget.generations:  # generation 0 is the initial population
            return f"{budget.generations} generations done"
        if budget.max_evaluations is not None and self.store.evaluation_count() >= budget.max_evaluations:
            return f"evaluation budget of {budget.max_evaluations} spent"
        if budget.wall_time_s is not None and elapsed >= budget.wall_time_s:
            return f"wall-time budget of {budget.wall_time_s:g} s spent"
        if budget.patience is not None and state["stale"] >= budget.patience and state["generation"] > 0:
            return f"no improvement for {budget.patience} generations"
        return ""

    def run(self) -> dict:
        """Run (or resume) to the end of the budget; returns the final state."""
        state = self.store.latest_checkpoint() or self._fresh_state()
        self._resumed_elapsed = state["elapsed_s"]
        islands = [self._restore(ids) for ids in state.get("islands", [state["population"]])]
        islands += [[] for _ in range(self.settings.islands - len(islands))]
        self.archive = self._restore([r["genome_id"] for r in self.store.individuals()])
        self.hall_of_fame.update(self._restore(state["hall_of_fame"]))
        for entry in state["logbook"]:
            self.logbook.record(**entry)
        rng = random.Random()
        rng.setstate(_as_rng_state(state["rng"]))
        seen = set(state["seen"])
        started = time.perf_counter()
        while not (stop := self._out_of_budget(state, started)):
            generation = state["generation"] + 1
            genomes, owners = self._variation(islands, rng, seen, generation)
            offspring = self.toolbox.map(self._tune, genomes)
            self.archive.extend(offspring)
            islands = self._survivors(islands, offspring, owners, generation)
            state = self._advance(state, generation, islands, offspring, rng, seen, started)
        state["stop_reason"] = stop
        self.store.set_meta("stop_reason", stop)
        return state

    def _elapsed(self, started: float) -> float:
        """Wall time of the whole run, across resumes."""
        return self._resumed_elapsed + time.perf_counter() - started

    def _advance(self, state, generation, islands, offspring, rng, seen, started) -> dict:
        population = [ind for island in islands for ind in island]
        self.hall_of_fame.update(offspring)
        record = self.stats.compile(population)
        self.logbook.record(gen=generation, nevals=len(offspring), evaluations=self.store.evaluation_count(),
                            **record)
        improved = record["best"] < state["best_s"]
        elapsed = self._elapsed(started)
        new = {"generation": generation, "population": [ind.origin_id for ind in population],
               "islands": [[ind.origin_id for ind in island] for island in islands],
               "seen": sorted(seen), "best_s": min(record["best"], state["best_s"]),
               "stale": 0 if improved else state["stale"] + 1, "elapsed_s": elapsed, "rng": rng.getstate(),
               "logbook": list(self.logbook), "hall_of_fame": [ind.origin_id for ind in self.hall_of_fame]}
        self.store.save_checkpoint(generation, new)
        self.on_generation(GenerationReport(generation, self.store.evaluation_count(), record["best"],
                                            record["median"], record["correct"], len(population), elapsed, improved))
        return new


def _as_rng_state(state) -> tuple:
    """random.Random state from its JSON form (lists) back to the nested tuple it must be."""
    version, internal, gauss = state
    return version, tuple(internal), gauss

