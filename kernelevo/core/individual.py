"""The individual: the one record of a kernel in a search.

Operators receive individuals (the parents, with their code, tuned parameters and measured result) and return
genomes; the search wraps each child genome in an individual with its lineage; the tuner returns it with the
parameters it chose and the result of that configuration; the run store writes and reads it back; the report draws
it. DEAP works on it directly: ``fitness`` is a DEAP fitness (a time, minimised), so selection, the hall of fame and
migration need no wrapper.

``id`` is unique within a run and names the individual's place in the lineage (``"<generation>.<index>"``); ``key``
names the kernel (its evaluated source), which two individuals reached by different paths may share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from deap import base

from kernelevo.core.evaluation_record import EvalResult
from kernelevo.core.genome import Genome
from kernelevo.core.records import from_record


class KernelFitness(base.Fitness):
    weights = (-1.0,)  # a time: lower is better


def individual_id(generation: int, index: int) -> str:
    return f"{generation}.{index}"


@dataclass(eq=False)
class Individual:
    id: str
    genome: Genome  # code, declared space and the chosen (tuned) parameters
    parents: tuple = ()  # parent individual ids
    operator: str = "seed"
    generation: int = 0
    result: EvalResult | None = None  # the evaluation of `genome.rendered()`; None until tuned
    trials: int = 0  # tuner configurations tried
    llm: dict = field(default_factory=dict)  # LLM usage of the operator call that made it: calls, tokens, cost_usd
    # evo.tuning.tuner's record: sampler, configurations tried (for descendants)
    tuning: dict = field(default_factory=dict)

    def __post_init__(self):
        self.parents = tuple(self.parents)
        self.fitness = KernelFitness()
        self.fitness.values = (self.time_s,)

    @property
    def key(self) -> str:
        return self.genome.key

    @property
    def note(self) -> str:
        return self.genome.note

    @property
    def status(self) -> str:
        return self.result.status if self.result is not None else "pending"

    @property
    def reason(self) -> str:
        return self.result.reason if self.result is not None else ""

    @property
    def ok(self) -> bool:
        return self.result is not None and self.result.ok

    @property
    def time_s(self) -> float:
        """The fitness: the measured time of a correct kernel, infinite for anything else."""
        if self.ok and self.result.time_s is not None:
            return self.result.time_s
        return math.inf

    def tuned(self, genome: Genome, result: EvalResult, trials: int, tuning: dict | None = None) -> "Individual":
        """This individual with the parameters the tuner chose, their result and the record of its tuning."""
        return replace(self, genome=genome, result=result, trials=trials, tuning=tuning or {})

    def lineage_dict(self) -> dict:
        """Everything but the result (stored once per kernel, under `key`)."""
        return {"id": self.id, "genome": self.genome.to_dict(), "parents": list(self.parents),
                "operator": self.operator, "generation": self.generation, "trials": self.trials, "llm": self.llm,
                "tuning": self.tuning}

    @classmethod
    def from_lineage_dict(cls, data: dict, result: EvalResult | None) -> "Individual":
        """The individual of a stored lineage row and its kernel's `result` (the record rule: ``from_record``)."""
        return from_record(cls, {**data, "genome": Genome.from_dict(data["genome"]), "result": result},
                           "an individual's lineage")
