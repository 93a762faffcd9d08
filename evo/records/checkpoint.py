"""A search's checkpoint, one record: the state after a number of children were folded in, saved under the last
whole generation (``evo.evolution.search.Search._checkpoint``) and read back by a resume, the report, the outcome and
the resume's checks (``kernelevo.resuming``).

Written by ``RunStore.save_checkpoint`` as JSON; a field missing from an older run's checkpoint reads as its
default (``children`` None: a checkpoint of before steady state, whole generations), and keys no version reads any
more (``offspring``, a run's ``stop_reason``) are left out.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from kernelevo.core.records import from_record


@dataclass
class Checkpoint:
    generation: int  # the last whole generation (0: the seeds)
    best_s: float = math.inf  # the best time so far (what "improved" is measured against)
    stale: int = 0  # generations in a row without improvement (search.patience)
    children: int | None = None  # children folded in (None: generation x children per generation)
    elapsed_s: float = 0.0  # the search's wall time so far, across resumes
    islands: list = field(default_factory=list)  # per island, its individuals' ids
    seen: list = field(default_factory=list)  # the kernels (keys) settled on by the children folded in
    tuned_at: dict = field(default_factory=dict)  # a tuned child's kernel -> the first child that tuned to it
    logbook: list = field(default_factory=list)  # one entry per generation: gen, nevals, evaluations, best, ...
    hall_of_fame: list = field(default_factory=list)  # ids, fastest first
    snapshots: dict = field(default_factory=dict)  # children folded -> islands, for the children a resume remakes
    ranks: dict = field(default_factory=dict)  # operator:parents -> children drawn from them (evo.evolution.ranks)

    def folded(self, per_generation: int) -> int:
        """Children folded in (a checkpoint of before steady state holds whole generations)."""
        return self.children if self.children is not None else self.generation * per_generation

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, data: dict) -> "Checkpoint":
        return from_record(cls, data, "a checkpoint")

    @classmethod
    def from_json(cls, text: str) -> "Checkpoint":
        return cls.from_dict(json.loads(text))
