"""The search: steady-state (mu + lambda) evolution of kernel individuals; the unit of work is one child.

    generation 0: the seeds (the seed first; a compiler seed brings Inductor's variants), each tuned
    child n:      started as soon as a slot frees (``search.parallel`` in flight; no generation barrier): select
                  parents from the state its window allows -> operator (LLM calls included) -> tune (Optuna trials
                  evaluated in parallel) -> folded in, in order: its island's best mu survive, the hall of fame, the
                  archive; after every lambda_ x islands children (x evaluators: ``lambda_per_gpu``; a "generation",
                  the unit of budgets, patience, migration, the logbook and checkpoints) migration and a checkpoint

Child n is ``<generation>.<slot>`` with generation 1 + n // (lambda_ x islands); it is made from the state after the
first n - staleness + 1 children were folded in (``evo.evolution.loop``), from its own RNG (run seed, generation, slot);
a child identical to a kernel made before it (by a lower child, or a seed) is drawn again (a child decides only after
the one before it; its tuning begins before that, so a child waiting on an LLM call holds up no evaluation). The tuner
tells Optuna its trials in the order it asked them. So the same config and seed give the same lineage and best kernel
for any number of workers or children in flight, given the same measurements; and a killed run resumes from its last
checkpoint (every generation, and where it stopped), remaking the children after it, their finished evaluations coming
from the store.
"""
from __future__ import annotations

import logging
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields, replace
from random import Random

from deap import tools

from kernelevo.core.errors import KernelevoError
from evo.evolution import stopping
from evo.records.checkpoint import Checkpoint
from evo.records.meta import STOP_REASON
from evo.evolution.loop import LoopPieces, steady_state, window_start
from evo.evolution.ranks import ParentRanks, rank_key
from evo.evolution.selection import DistinctParents, Tournament
from evo.settings import SearchSettings
from evo.evolution.strategy import Evolution
from evo.records.store import RunStore
from evo.evolution.toolbox import build_toolbox, statistics
from evo.tuning.tuner import Tuner
from kernelevo.core.genome import Genome
from kernelevo.core.individual import Individual, individual_id
from kernelevo.core.evaluation_record import NO_VERDICT
from fitness.measure.verdict_text import brief
from operators.base import (CURRENT_CHILD, BudgetExhausted, ChildUsage, Duplicate, Operator, OperatorContext,
                            OperatorUnavailable)

log = logging.getLogger(f"kernelevo.{__name__}")
ATTEMPTS_PER_CHILD = 20  # draws of (operator, parents) before a slot gives up finding a new child


@dataclass
class SearchState(Checkpoint):
    """The running search's state: the checkpoint it saves next (``checkpoint``) and what lives in the running search
    only; ``Search.run`` returns it as a dict (``to_dict``)."""

    offspring: int = 0  # children folded into the generation so far
    stop_reason: str = ""  # why the search stopped (set when it has)

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(**{f.name: getattr(self, f.name) for f in fields(Checkpoint)})


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
                 settings: SearchSettings, on_generation=None, selection=None, team=None, strategy=None,
                 spent_s: float = 0.0):
        """`seeds`: generation 0's genomes and what made each (seed, inductor, inductor:<variant>, initialiser),
        the seed first: the kernel a run's speed-up over its seed is measured against. `strategy`: what each child
        is made from (evo.evolution.strategy; None: evolution). `spent_s`: wall time a new search has spent before
        it began (the compiler seeds judged, ``evo.runs.seeding``), counted against its budget."""
        if not operators:
            raise KernelevoError("the search needs at least one operator (operators.list is empty)")
        if not seeds:
            raise ValueError("the search needs a seed genome")
        self.seeds, self.spent_s = seeds, spent_s
        self.strategy = strategy or Evolution()
        self.operators = self.strategy.usable(operators)
        self.tuner = tuner
        self.store = store
        self.settings = settings = self.strategy.check(settings)
        self.on_generation = on_generation or (lambda report: None)
        self.service = tuner.service
        self._children = ThreadPoolExecutor(settings.children_in_flight, thread_name_prefix="kernelevo-child")
        self._tunings = ThreadPoolExecutor(settings.children_in_flight, thread_name_prefix="kernelevo-tune")
        self.toolbox = build_toolbox(self._children.map, DistinctParents(selection or Tournament(2)))
        self.archive: list[Individual] = []  # every individual folded in, seeds first: the tree memory
        self.islands: list[list[Individual]] = []
        self.team = team  # the LLM agents, for LLM operators; None in an offline run
        # why an operator budget (LLM calls, cost) stopped the search; why an operator cannot go on (its LLM down)
        self._exhausted = self._gone = ""
        self.stats = statistics()
        self.logbook = tools.Logbook()
        self.hall_of_fame = tools.HallOfFame(settings.hall_of_fame, similar=lambda a, b: a.key == b.key)
        self.generation, self.best_s = -1, math.inf  # for progress displays
        # what the children decide against, folded state by state (see the module's docstring)
        self._snapshots: dict[int, tuple[list, int]] = {}  # children folded -> (islands, archive length)
        self._decided: dict[int, Future] = {}  # child n -> the key it settled on (None: no new child)
        self._settled: dict[str, int] = {}  # a kernel settled on -> the first child that did (-1: a seed)
        self._tuned_at: dict[str, int] = {}  # a tuned child's kernel -> the first child that tuned to it
        self._ranks = ParentRanks()  # which child of its parents each child is (OperatorContext.rank)
        self._state = SearchState(generation=-1)

    # children --------------------------------------------------------------------------------------------------
    def _owner(self, n: int) -> int:
        return (n % self.settings.per_generation) // self.settings.offspring

    def _id(self, n: int) -> tuple[int, int]:
        """(generation, slot) of child n."""
        return 1 + n // self.settings.per_generation, n % self.settings.per_generation

    def _new_to(self, n: int, key: str) -> bool:
        """Whether `key` is new to child n: no seed, no child before it settled on it, and no child folded into
        its window tuned to it."""
        return key not in self._settled and self._tuned_at.get(key, n) >= window_start(n, self.settings.window)

    def _vary(self, n: int, population: list, archive: tuple, context: OperatorContext) -> tuple:
        """A new child n, drawn until it is a kernel no child before it made (None: none), and its tuning's future
        where it began before the child before it decided (``_tune_early``; None: not begun)."""
        made, weights = None, [op.weight for op in self.operators]
        generation, slot = self._id(n)
        try:
            for attempt in range(ATTEMPTS_PER_CHILD):
                if self._exhausted or self._gone:
                    break
                rng = Random(f"{self.settings.seed}:{generation}:{slot}:{attempt}")
                operator = rng.choices(self.operators, weights=weights)[0]
                parents = self.strategy.parents(self.toolbox.select_parents, population, archive, operator.arity, rng)
                rank = self._ranks.rank(n, rank_key(operator.name, parents), first_draw=attempt == 0)
                try:
                    genomes = operator(parents, rng, replace(context, rank=rank,
                                                             reserved=lambda: self._ranks.ready(n)))
                except BudgetExhausted as exc:
                    self._exhausted, genomes = str(exc), []
                except OperatorUnavailable as exc:
                    self._gone, genomes = str(exc), []
                finally:
                    self._ranks.ready(n)
                early = self._tune_early(n, genomes, parents, operator.name)
                if n - 1 in self._decided:  # decide after the child before: it may have made the same kernel
                    self._decided[n - 1].result()
                genome = next((g for g in genomes if self._new_to(n, g.key)), None)
                if genome is None and genomes:  # a kernel made before: the next attempt is told, so it asks anew
                    context = replace(context, duplicates=(*context.duplicates,
                                                           Duplicate(operator.name, genomes[0].note)))
                if early is not None and (genome is None or early[0].key != genome.key):
                    wait([early[1]])  # tuned in vain (a child before it made that kernel): its study ends first
                    early = None
                if genome is not None:
                    made = Individual(individual_id(generation, slot), genome, parents=tuple(p.id for p in parents),
                                      operator=operator.name, generation=generation)
                    return made, early[1] if early is not None else None
            return None, None
        finally:
            self._ranks.skip(n)  # it drew nothing: the child after it must not wait for its rank
            if n - 1 in self._decided:
                self._decided[n - 1].result()
            if made is not None:
                self._settled.setdefault(made.key, n)
            self._decided[n].set_result(made.key if made is not None else None)

    def _child(self, n: int, islands: list, archive: tuple) -> Individual | None:
        """Child n from parents to a tuned individual (folded in and stored later, in order)."""
        generation, slot = self._id(n)
        context = OperatorContext(generation=generation, profile=self.service.profile, team=self.team,
                                  evaluate=lambda source: self.service.evaluate(source)[1],
                                  archive=self.strategy.told(archive), attempts=self.strategy.attempts(archive),
                                  profile_kernel=self.service.profile_kernel, independent=self.strategy.independent)
        usage = ChildUsage(individual_id(generation, slot))
        token = CURRENT_CHILD.set(usage)
        try:
            child, tuning = self._vary(n, islands[self._owner(n)], archive, context)
        finally:
            CURRENT_CHILD.reset(token)
            self._ranks.skip(n)
            if not self._decided[n].done():  # _vary never began (an error): the child after it must not wait
                self._decided[n].set_result(None)
        if child is None:
            return None
        tuned = replace(tuning.result() if tuning is not None else self.tuner.tune(child), llm=usage.summary())
        return None if tuned.status in NO_VERDICT else tuned  # cut at the deadline, or no worker to judge it

    def _tune_early(self, n: int, genomes: list, parents: list, operator: str) -> tuple | None:
        """(individual, its tuning's future) of the kernel child n settles on unless a child before it, undecided yet,
        made it too: begun at once, so a child waiting on the one before it (an LLM call) holds up no evaluation. The
        decision is as before; a tuning begun in vain is waited for and dropped (``_vary``): the same lineage."""
        genome = next((g for g in genomes if self._new_to(n, g.key)), None)
        if genome is None:
            return None
        generation, slot = self._id(n)
        early = Individual(individual_id(generation, slot), genome, parents=tuple(p.id for p in parents),
                           operator=operator, generation=generation)
        return early, self._tunings.submit(self.tuner.tune, early)

    def _start(self, n: int) -> Future:
        islands, archive_len = self._snapshots[window_start(n, self.settings.window)]
        self._decided[n] = Future()
        future = self._children.submit(self._child, n, islands, tuple(self.archive[:archive_len]))
        future.add_done_callback(lambda _, n=n: self._settle(n))  # also when the loop cancels it before it began
        return future

    def _settle(self, n: int) -> None:
        """Child n is over: the child after it, waiting to decide after it, must not wait for ever (a child the loop
        cancelled before it began never decided; an interrupt did that)."""
        self._ranks.skip(n)
        decided = self._decided.get(n)
        if decided is not None and not decided.done():
            decided.set_result(None)

    def _seeds(self) -> list[Individual]:
        """Generation 0: every seed tuned (concurrently), stored as 0.0, 0.1, ...; a line for each as it is tuned,
        with its verdict, so that a long generation 0 is never silent (docs/measurements.md)."""
        def tuned(index: int) -> Individual:
            genome, made_by = self.seeds[index]
            ind = self.tuner.tune(Individual(individual_id(0, index), genome, operator=made_by, generation=0))
            self.store.add_individual(ind)
            log.info(f"generation 0: seed {index + 1} of {len(self.seeds)} ({made_by}) tuned over {ind.trials} "
                     f"trial(s): {brief(ind.result) if ind.result is not None else 'no verdict'}")
            return ind

        return list(self.toolbox.map(tuned, range(len(self.seeds))))

    def _generation0(self) -> list[Individual]:
        """The seeds tuned (``_seeds``) within generation 0's own cap (``Budget.generation0_s``, counted like the
        search's budget from the time spent before it: the seeds judged), then the search's budget cut again."""
        budget = self.settings.budget
        if budget.generation0_s is None or budget.generation0_wall_s == budget.wall_time_s:
            return self._seeds()
        self._cut_at(self._started + budget.generation0_wall_s - self._resumed_elapsed)
        try:
            return self._seeds()
        finally:
            self._cut_at(None if budget.wall_time_s is None else
                         self._started + budget.wall_time_s - self._resumed_elapsed)

    # folding in ------------------------------------------------------------------------------------------------
    def _fold(self, n: int, child: Individual | None) -> None:
        """Child n into the state: stored, archived, its island's best mu (one individual per kernel) survive; at
        the end of a generation, migration, the logbook and a checkpoint."""
        self._ranks.fold(n)
        if child is not None:
            self.store.add_individual(child)
            self.archive.append(child)
            self.hall_of_fame.update([child])
            self._tuned_at.setdefault(child.key, n)
            island = self._owner(n)
            self.islands[island] = self.toolbox.select_survivors(_one_per_kernel(self.islands[island] + [child]),
                                                                 self.settings.mu)
            self._state.offspring += 1
            self.best_s = min(self.best_s, child.time_s)
        self._decided.pop(n - 1, None)
        folded = n + 1
        if folded % self.settings.per_generation == 0:
            generation = folded // self.settings.per_generation
            s = self.settings
            if s.islands > 1 and s.migration_size and generation % s.migration_interval == 0 and \
                    all(len(island) >= s.migration_size for island in self.islands):
                tools.migRing(self.islands, s.migration_size, tools.selBest, replacement=tools.selWorst)
            self._advance(generation, folded)
        self._snapshots[folded] = ([list(island) for island in self.islands], len(self.archive))
        for old in [c for c in self._snapshots if c < window_start(folded, self.settings.window)]:
            del self._snapshots[old]

    # stops -----------------------------------------------------------------------------------------------------
    def _ended(self, n: int) -> str:
        """Why the search ends before child n, from the state folded so far (the same whatever the timing); or, at
        once, an operator that cannot go on: the children not folded yet are dropped, a resume makes them again."""
        if self._gone:
            return self._gone
        stops = stopping.ended(self.settings.budget, self._id(n)[0], self._state.generation, self._state.stale)
        return stops[0].reason if stops else ""

    def _spent(self) -> str:
        """Which resource budget is spent: no child starts any more."""
        if self._exhausted:
            return f"operator budget spent: {self._exhausted}"
        stops = stopping.spent(self.settings.budget, self.store, self.elapsed_s)
        return stops[0].reason if stops else ""

    # the run ---------------------------------------------------------------------------------------------------
    def _restore(self, state: Checkpoint) -> int:
        """The checkpoint's state (nothing folded after it); returns how many children it holds."""
        per = self.settings.per_generation
        folded = state.folded(per)
        by_id = {ind.id: ind for ind in self.store.individuals()}

        def index(ind: Individual) -> int:
            return -1 if ind.generation == 0 else (ind.generation - 1) * per + int(ind.id.split(".")[1])

        self.archive = sorted((ind for ind in by_id.values() if index(ind) < folded), key=index)
        self.hall_of_fame.update([by_id[i] for i in state.hall_of_fame])
        for entry in state.logbook:
            self.logbook.record(**entry)
        self.islands = [[by_id[i] for i in island] for island in state.islands]
        archive_len = {c: sum(1 for ind in self.archive if index(ind) < c) for c in
                       range(window_start(folded, self.settings.window), folded + 1)}
        for count, length in archive_len.items():
            islands = state.snapshots.get(str(count), state.islands)
            self._snapshots[count] = ([[by_id[i] for i in island] for island in islands], length)
        self._settled = {key: -1 for key in state.seen}
        self._tuned_at = dict(state.tuned_at)
        self._ranks = ParentRanks(state.ranks, folded)
        self.generation, self.best_s = state.generation, state.best_s
        return folded

    def run(self) -> dict:
        """Run (or resume) to the end of the budget; returns the final state (``SearchState.to_dict``)."""
        state = self.store.latest_checkpoint()
        self._resumed_elapsed = state.elapsed_s if state else self.spent_s
        self._started = time.perf_counter()
        if self.settings.budget.wall_time_s is not None:  # work not begun by then is cut, never judged
            self._cut_at(self._started + self.settings.budget.wall_time_s - self._resumed_elapsed)
        try:
            if state is None:
                self._state = SearchState(generation=-1)
                seeds = self._generation0()
                self.archive = list(seeds)
                self.islands = [_one_per_kernel(seeds) for _ in range(self.settings.islands)]
                self.hall_of_fame.update(seeds)
                self._settled = {key: -1 for key in [genome.key for genome, _ in self.seeds] + [s.key for s in seeds]}
                self._state.offspring = len(seeds)
                self._advance(0, 0)
                folded = 0
                self._snapshots[0] = ([list(island) for island in self.islands], len(self.archive))
            else:
                self._state = SearchState(**state.to_dict())
                folded = self._restore(state)
            pieces = LoopPieces(start=self._start, fold=self._fold, ended=self._ended, spent=self._spent)
            stop = steady_state(pieces, folded, self.settings.children_in_flight, self.settings.window)
        finally:
            self._cut_at(0.0)  # children still running were dropped: nothing more of theirs begins
            self._children.shutdown(wait=True)
            self._tunings.shutdown(wait=True)
            self._cut_at(None)
        # the state at the stop, also with no child folded since the last checkpoint: the search's time then counts
        # what it spent since (children dropped, an LLM's retries and waits), not the time at that checkpoint
        self._checkpoint(self._state.generation, max(self._snapshots))
        self._state.stop_reason = stop
        self.store.set_meta(STOP_REASON, stop)
        return self._state.to_dict()

    def _cut_at(self, deadline: float | None) -> None:
        """No evaluation begins, and no LLM request is sent, after `deadline` (time.perf_counter(); None: none); an
        evaluation begun before it and still running then is killed (``EvaluationService.cut_at``)."""
        self.service.cut_at(deadline)
        if self.team is not None:
            self.team.client.cut_at(deadline)

    @property
    def elapsed_s(self) -> float:
        """The search's wall time so far, across resumes (what `search.wall_time_s` is counted against)."""
        return self._resumed_elapsed + time.perf_counter() - self._started if hasattr(self, "_started") else 0.0

    def _advance(self, generation: int, folded: int) -> None:
        """The end of a generation: its logbook entry, report and checkpoint."""
        population = [ind for island in self.islands for ind in island]
        record = self.stats.compile(population)
        self.logbook.record(gen=generation, nevals=self._state.offspring,
                            evaluations=self.store.evaluation_count(), elapsed_s=round(self.elapsed_s, 3), **record)
        improved = record["best"] < self._state.best_s
        self._state = replace(self._state, best_s=min(record["best"], self._state.best_s), offspring=0,
                              stale=0 if improved else self._state.stale + 1)
        self._checkpoint(generation, folded)
        self.generation = generation
        self.on_generation(GenerationReport(generation, self.store.evaluation_count(), record["best"],
                                            record["median"], record["correct"], len(population),
                                            self._state.elapsed_s, improved))

    def _checkpoint(self, generation: int, folded: int) -> None:
        """The state after `folded` children, saved under the last whole generation (`generation`)."""
        window = range(window_start(folded, self.settings.window), folded)  # the snapshots a resume needs
        self._state = replace(
            self._state, generation=generation, children=folded, elapsed_s=self.elapsed_s,
            islands=[[ind.id for ind in island] for island in self.islands],
            seen=sorted(key for key, n in self._settled.items() if n < folded),  # not those of children running
            tuned_at=dict(self._tuned_at), ranks=self._ranks.counts, logbook=list(self.logbook),
            hall_of_fame=[ind.id for ind in self.hall_of_fame],
            snapshots={str(c): [[ind.id for ind in island] for island in self._snapshots[c][0]]
                       for c in window if c in self._snapshots})
        # `offspring` (children folded into the generation so far) lives in the running search only
        self.store.save_checkpoint(self._state.checkpoint())


def _one_per_kernel(individuals: list) -> list:
    """The first individual of each kernel (key), in order: the population keeps the one it already had."""
    first: dict = {}
    return [first.setdefault(ind.key, ind) for ind in individuals if ind.key not in first]
