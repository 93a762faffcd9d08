"""A run's plan (``RunPlan``): everything ``evo.runs.run`` is made of, as typed settings, made once per command from the
composed config (``conf.plan.run_plan``; a resume's from the config its run store kept). No layer below reads the
config itself: each takes its part of the plan (the fitness layer ``JudgePlan``, the LLM team ``LLMPlan``, the search
``SearchSettings``, the tuner ``TunerSettings``). The plug-ins (``_target_`` nodes: the selection, the strategy, the
operators, the evaluation backend) stay their config nodes, each made by Hydra's ``instantiate`` where it is used."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evo.settings import SearchSettings, TunerSettings
from fitness.evaluation.plan import JudgePlan
from operators.llm.settings import LLMPlan
from seeds.inductor.settings import CaptureSettings


@dataclass(frozen=True)
class RunPlan:
    judge: JudgePlan  # the problem, how it is judged, on what
    search: SearchSettings  # the population and the budget (search.*)
    tuner: TunerSettings = field(default_factory=TunerSettings)  # search.tuner
    operators: tuple = ()  # operators.list: each operator's node
    selection: Any = None  # search.selection's node (None: the search's default)
    strategy: Any = None  # search.strategy's node (None: evolution, as a run saved before strategies)
    backend: Any = None  # fitness.backend's node (None: this host, evo.service.evaluation.LocalEvaluators)
    llm: LLMPlan | None = None  # None: an offline run (llm=none)
    variants: dict | None = None  # inductor.variants: name -> Inductor options (None: its defaults only)
    capture: CaptureSettings = field(default_factory=CaptureSettings)  # inductor.*: the capture's time
    gpus: Any = "auto"  # the local backend's GPUs (auto, or indices)
    parallel: Any = "auto"  # evaluations in flight (auto, or a number)
    config: dict = field(default_factory=dict)  # the composed config, resolved: what the run store keeps
