"""The individual: the one record of a kernel in a search.

Operators receive individuals (the parents, with their code, tuned parameters and measured result) and return
genomes; the search wraps each child genome in an individual with its lineage; the tuner returns it with the
parameters it chose and the result of that configuration; the run store writes and reads it back; the report draws
it. DEAP works on it directly: ``fitness`` is a DEAP fitness (minimised: a GPU time, or on the interpreter a stated
proxy, ``ranked_by``), so selection, the hall of fame and migration need no wrapper.

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
    weights = (-1.0,)  # a time, or on the interpreter a count of launches (``rank_value``): lower is better


INTERPRETER_TIMER = "interpreter"  # EvalResult.timer of a kernel run by Triton's CPU interpreter
GPU_TIME = "GPU time"
LAUNCHES = ("Triton launches counted in the correctness calls, fewer first (a proxy, not a speed: interpreter times "
            "rank nothing); equal counts: the kernel found first")


def ranked_by(result: EvalResult | None) -> str:
    """What kernels are ranked by -- the parents chosen, the survivors, the tree's nodes, the refinement's current best,
    patience, the hall of fame and the best kernel -- given one kernel's result: the one place it is decided.

    On a GPU, the measured time. On Triton's CPU interpreter, whose wall-clock says nothing of a GPU's (nor is it
    steady from one run to the next: docs/configuration.md, "Choosing without a GPU"), no time ranks anything; kernels
    rank by a stated proxy instead: the Triton launches the judge counted in its correctness calls (the same calls for
    every kernel of one problem), fewer first -- each launch a pass through global memory on a GPU, so fusing passes
    moves fewer bytes. The cost model (``fitness.problems.speed_of_light``) estimates a problem, not a kernel, so it
    cannot rank kernels. Equal counts keep the kernel found first (DEAP's hall of fame and best-of selections keep the
    first of equals)."""
    return LAUNCHES if result is not None and result.timer == INTERPRETER_TIMER else GPU_TIME


def rank_value(result: EvalResult | None) -> float:
    """The fitness of a kernel with `result` (lower is better), by ``ranked_by``'s rule: infinite unless correct."""
    if result is None or not result.ok or result.time_s is None:
        return math.inf
    if ranked_by(result) == LAUNCHES:
        return float((result.guards or {}).get("triton_launches", 0))
    return result.time_s


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
        self.fitness.values = (rank_value(self.result),)

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
    def rank(self) -> float:
        """What the search ranks it by, lower first (``rank_value``): its GPU time, or on the interpreter a proxy."""
        return rank_value(self.result)

    @property
    def time_s(self) -> float:
        """The measured time of a correct kernel, infinite for anything else (on the interpreter its wall-clock,
        which ranks nothing: ``ranked_by``)."""
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
