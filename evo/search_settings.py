"""The search's settings (``search.*`` in conf): its shape (``SearchSettings``: mu, lambda_, islands, children
in flight, staleness) and when it stops (``Budget``). Read by ``evo.search.Search``."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Budget:
    generations: int = 5
    max_evaluations: int | None = None
    max_gpu_s: float | None = None  # seconds of evaluation (their eval_wall_s): GPU-seconds on a GPU
    wall_time_s: float | None = None
    patience: int | None = 3  # stop after this many generations without improvement

    def __post_init__(self):
        for name in ("generations", "max_evaluations", "max_gpu_s", "wall_time_s", "patience"):
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
    parallel: int | None = None  # children in flight at once; None: lambda_ x islands
    staleness: int | None = None  # child n is made from the state after n - staleness + 1 children; None:
                                  # lambda_ x islands (more children in flight than this never run at once)
    budget: Budget = field(default_factory=Budget)

    def __post_init__(self):
        if self.mu < 1 or self.lambda_ < 1:
            raise ValueError(f"search.mu and search.lambda_ must be at least 1, got {self.mu}, {self.lambda_}")
        if self.islands < 1 or self.migration_interval < 1 or not 0 <= self.migration_size <= self.mu:
            raise ValueError(f"search.islands and search.migration_interval must be at least 1 and "
                             f"search.migration_size within [0, mu]; got {self.islands}, {self.migration_interval}, "
                             f"{self.migration_size}")
        if self.parallel is not None and self.parallel < 1:
            raise ValueError(f"search.parallel must be at least 1 (or null: lambda_ x islands), got "
                             f"{self.parallel}")
        if self.staleness is not None and self.staleness < 1:
            raise ValueError(f"search.staleness must be at least 1 (or null: lambda_ x islands), got "
                             f"{self.staleness}")

    @property
    def per_generation(self) -> int:
        """Children per generation: lambda_ per island."""
        return self.lambda_ * self.islands

    @property
    def window(self) -> int:
        """The staleness bound: how many children before it a child may not yet see folded in."""
        return self.staleness or self.per_generation

    @property
    def children_in_flight(self) -> int:
        return min(self.parallel or self.per_generation, self.window)
