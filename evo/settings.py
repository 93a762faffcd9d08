"""The search's settings (``search.*`` of a run), each with its one default and what it means.

``kernelevo/config/schema.py`` makes these the schema of the ``search`` config node (``SearchConfig``: the
population and the budget side by side, as the command line names them, plus the tuner and the selection and
strategy plug-ins);
``conf/search/*.yaml`` hold only group choices and overrides (``search/tiny.yaml``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from kernelevo.core.errors import KernelevoError

SAMPLERS = {"tpe": "multivariate TPE", "random": "seeded random search"}


@dataclass
class Budget:
    """When the search stops (``search.generations``, ...)."""
    generations: int = 5  # after generation 0 (the seed, tuned)
    max_evaluations: Optional[int] = None  # evaluator calls in the whole run (null: no limit)
    # seconds of evaluation in the whole run, each evaluation's own (their eval_wall_s: GPU-seconds on a GPU; null:
    # no limit): no child begins after it
    max_gpu_s: Optional[float] = None
    # seconds of search (baselines and seed capture apart): no child or evaluation begins after it, and evaluations
    # still running then are cut (their workers killed, counted as evaluations_cut) (null: no limit)
    wall_time_s: Optional[float] = 900.0
    # seconds of wall_time_s that generation 0 (the seeds judged and tuned) may take: its evaluations not begun by
    # then are not made and those still running are cut, the rest of wall_time_s left to the children; the seed and
    # max-autotune's seed are judged whatever it says (evo.runs.seeding.floor). null: generation 0 may take it all
    generation0_s: Optional[float] = None
    patience: Optional[int] = 3  # stop after this many generations without improvement (null: never)

    @property
    def generation0_wall_s(self) -> float | None:
        """Seconds of search generation 0 may take: its own cap within wall_time_s (None: no limit)."""
        caps = [cap for cap in (self.wall_time_s, self.generation0_s) if cap is not None]
        return min(caps) if caps else None

    def __post_init__(self):
        for name in ("generations", "max_evaluations", "max_gpu_s", "wall_time_s", "generation0_s", "patience"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise KernelevoError(f"search.{name} must not be negative, got {value}")


@dataclass
class Population:
    """The populations and how children are made from them (``search.mu``, ...)."""
    mu: int = 4  # survivors per island and generation
    lambda_: int = 8  # offspring per island and generation
    hall_of_fame: int = 5
    seed: int = 0
    islands: int = 1  # > 1: that many populations (mu and lambda_ each), the best migrating around a ring
    migration_interval: int = 2  # generations between migrations
    migration_size: int = 1  # individuals each island sends to the next (replacing its worst)
    # children in flight at once (each: parents -> operator -> tuning -> folded in); null = lambda_ x islands (x the
    # evaluators: lambda_per_gpu). No generation barrier: a child starts as soon as one is folded in
    parallel: Optional[int] = None
    # child n is made from the population after child n - staleness was folded in (the same whatever the number in
    # flight); null = lambda_ x islands (x the evaluators: lambda_per_gpu; as a generation: its first child sees the
    # last one's parents' generation), also the most children ever in flight
    staleness: Optional[int] = None
    # supply that follows the GPUs: lambda_ is per evaluator (GPU, or Ray actor), so a search on N of them makes
    # N x lambda_ children per island and generation, N times as many in flight, and tunes its seeds N times as
    # many trials, as many at once (search.tuner.trials and .parallel per evaluator for a seed); the lineage is a
    # function of config, seed, measurements and that N (kept from the run's start on resume). false: lambda_ and
    # the seeds' trials whatever the GPUs
    lambda_per_gpu: bool = True


@dataclass
class SearchSettings(Population):
    """The search's settings as ``evo.evolution.search.Search`` takes them: the population, and the budget in one
    part."""
    budget: Budget = field(default_factory=Budget)
    # evaluators the search was started with (GPUs, Ray actors; 1 on the interpreter): not a config key, the run sets
    # it (``on_evaluators``)
    evaluators: int = 1

    def __post_init__(self):
        if self.mu < 1 or self.lambda_ < 1:
            raise KernelevoError(f"search.mu and search.lambda_ must be at least 1, got {self.mu}, {self.lambda_}")
        if self.islands < 1 or self.migration_interval < 1 or not 0 <= self.migration_size <= self.mu:
            raise KernelevoError(f"search.islands and search.migration_interval must be at least 1 and "
                                 f"search.migration_size within [0, mu]; got {self.islands}, "
                                 f"{self.migration_interval}, {self.migration_size}")
        if self.parallel is not None and self.parallel < 1:
            raise KernelevoError(f"search.parallel must be at least 1 (or null: lambda_ x islands), got "
                                 f"{self.parallel}")
        if self.staleness is not None and self.staleness < 1:
            raise KernelevoError(f"search.staleness must be at least 1 (or null: lambda_ x islands), got "
                                 f"{self.staleness}")

    def on_evaluators(self, evaluators: int) -> "SearchSettings":
        """The settings of a search on `evaluators` evaluators (GPUs): its supply scaled to them (lambda_per_gpu)."""
        if evaluators < 1:
            raise ValueError(f"a search needs at least one evaluator, got {evaluators}")
        return replace(self, evaluators=evaluators)

    @property
    def scale(self) -> int:
        """How many times the configured supply the search makes: its evaluators, or 1 (lambda_per_gpu=false)."""
        return self.evaluators if self.lambda_per_gpu else 1

    @property
    def offspring(self) -> int:
        """Children per island and generation: lambda_, per evaluator (``scale``)."""
        return self.lambda_ * self.scale

    @property
    def per_generation(self) -> int:
        """Children per generation: lambda_ (per evaluator) per island."""
        return self.offspring * self.islands

    def seed_trials(self, trials: int) -> int:
        """Trials of one seed in generation 0 (the seeds, tuned together before any child): the tuner's trials per
        evaluator (``scale``), so generation 0 on N evaluators is N times generation 0 on one, in as many of the
        tuner's batches (rounds of trials told before the next are asked)."""
        return trials * self.scale

    def seed_batch(self, tuner_parallel: int, trials: int) -> int:
        """Trials of one seed evaluated at once in generation 0: the tuner's batch per evaluator, at most every one
        of the seed's trials (``seed_trials``)."""
        return max(1, min(self.seed_trials(trials), tuner_parallel * self.scale))

    @property
    def window(self) -> int:
        """The staleness bound: how many children before it a child may not yet see folded in."""
        return self.staleness or self.per_generation

    @property
    def children_in_flight(self) -> int:
        return min(self.parallel or self.per_generation, self.window)


@dataclass
class TunerSettings:
    """``search.tuner``: each individual's own Optuna study (``evo.tuning.tuner``)."""
    trials: int = 6  # Optuna trials per individual (its first trial is the operator's own choice)
    # trials of one individual asked at once and evaluated concurrently (told back in order). TPE learns between
    # batches, so this is part of the search: 3 gives its model a second batch within the default 6 trials; more at
    # once raise no throughput (docs/measurements.md)
    parallel: int = 3
    sampler: str = "tpe"  # tpe: multivariate TPE, a third of the trials random start-up; random: seeded random search
    # tpe: each study starts from the trials of the individual's ancestors of the same kernel structure (same code
    # but for the launch constants); they count towards the start-up
    warm_start: bool = True
    prune_factor: float = 1.5  # configurations slower than this x the study's best are recorded as pruned

    def __post_init__(self):
        if self.trials < 1 or self.parallel < 1:
            raise KernelevoError(f"search.tuner.trials and search.tuner.parallel must be at least 1, got "
                                 f"{self.trials}, {self.parallel}")
        if self.sampler not in SAMPLERS:
            raise KernelevoError(f"search.tuner.sampler={self.sampler!r} is not a sampler; use one of "
                                 f"{', '.join(SAMPLERS)}")
