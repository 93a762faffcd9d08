"""A run's plan (``RunPlan``): everything ``evo.runs.run`` is made of, made once per command from the composed config
(``kernelevo.plans.run_plan``; a resume's from the config its run store kept). No layer below reads the config
itself: each takes its part of the plan (the fitness layer ``JudgePlan``, the LLM team ``LLMPlan``, the search
``SearchSettings``, the tuner ``TunerSettings``). The plug-ins (the operators, the selection, the strategy, the
evaluation backend) are in it as the objects their ``_target_`` nodes made, each made once, when the plan is; the
protocols below say what the run asks of each (the classes live in ``evo.evolution`` and ``evo.service``, above this
module)."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

from evo.settings import SearchSettings, TunerSettings
from fitness.evaluation.plan import JudgePlan
from operators.base import Operator
from operators.llm.settings import LLMPlan
from kernelevo.seeds.inductor.settings import CaptureSettings


class Selection(Protocol):
    """``search.selection`` (``evo.evolution.selection``): `k` parents from the population (the archive beside it)."""

    def __call__(self, population: list, archive: list, k: int, rng: random.Random) -> list: ...


class Strategy(Protocol):
    """``search.strategy`` (``evo.evolution.strategy``, whose ``Evolution`` is the default): what each child is made
    from."""
    name: str
    independent: bool

    def check(self, settings: SearchSettings) -> SearchSettings: ...

    def usable(self, operators: list) -> list: ...

    def parents(self, select, population: list, archive: tuple, arity: int, rng: random.Random) -> list: ...

    def told(self, archive: tuple) -> tuple: ...

    def attempts(self, archive: tuple) -> tuple: ...


class EvaluationBackend(Protocol):
    """``fitness.backend`` (``evo.service``: this host's evaluators, Ray's, a replay's): the run's evaluation service,
    made when the run starts."""

    def service(self, plan: RunPlan, store: Any) -> Any: ...


@dataclass(frozen=True)
class RunPlan:
    judge: JudgePlan  # the problem, how it is judged, on what
    search: SearchSettings  # the population and the budget (search.*)
    strategy: Strategy  # search.strategy (evolution for a run saved before strategies)
    backend: EvaluationBackend  # fitness.backend (this host's evaluators for a run saved before backends)
    tuner: TunerSettings = field(default_factory=TunerSettings)  # search.tuner
    operators: tuple[Operator, ...] = ()  # operators.list
    selection: Selection | None = None  # search.selection (None: the search's default, a tournament of 2)
    llm: LLMPlan | None = None  # None: an offline run (llm=none)
    variants: dict | None = None  # inductor.variants: name -> Inductor options (None: its defaults only)
    capture: CaptureSettings = field(default_factory=CaptureSettings)  # inductor.*: the capture's time
    gpus: Any = "auto"  # the local backend's GPUs (auto, or indices)
    parallel: Any = "auto"  # evaluations in flight (auto, or a number)
    config: dict = field(default_factory=dict)  # the composed config, resolved: what the run store keeps
