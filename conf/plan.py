"""A command's config turned, once, into its typed plan: the settings objects each layer takes.

The composed config is typed by the schema (``conf.schema``); ``typed`` builds its dataclasses
(``OmegaConf.to_object``: every settings class's checks run there, once). The schema keeps the command line's flat
keys (``search.generations`` beside ``search.mu``; ``llm.model`` beside ``llm.edit_format``), so a node of it may
gather several settings classes by inheritance (``SearchConfig`` is a ``Budget`` and a ``Population``,
``LLMConfig`` an ``LLMSettings`` and a ``TeamSettings``, ``FitnessConfig`` an ``EvalSettings`` with the policy and
backend choices); ``part`` takes one of them out, by that class's own fields: the one rule by which every layer's
settings come out of the schema. The plug-ins (``_target_`` nodes) stay their config nodes, for Hydra's
``instantiate`` where they are used.
"""
from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from core.errors import KernelevoError
from evo.plan import RunPlan
from evo.settings import Budget, Population, SearchSettings
from fitness.evaluation.plan import JudgePlan
from fitness.comparison.policy import PrecisionPolicy, named_for_overrides
from fitness.settings import EvalSettings
from operators.llm.settings import LLMPlan, LLMSettings, TeamSettings
from seeds.inductor.settings import CaptureSettings


def typed(cfg: DictConfig) -> Any:
    """The composed config as the schema's dataclasses (its interpolations resolved). KernelevoError naming the key
    whose value a settings class refuses (a settings class's own KernelevoError passes as it is)."""
    try:
        return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:  # a value OmegaConf refuses: its type, a missing value
        cause = exc.__cause__ if isinstance(exc.__cause__, ValueError) else None
        raise KernelevoError(str(cause) if cause else f"{str(exc).splitlines()[0]} (key {exc.full_key})") from exc


def part(node: Any, cls: type) -> Any:
    """The `cls` settings (a dataclass `node`'s class derives from) of a schema node: its fields of `cls`'s names."""
    return cls(**{f.name: getattr(node, f.name) for f in fields(cls) if f.init})


def judge_plan(node: Any) -> JudgePlan:
    """The judge's part of a typed command config (``conf.schema.JudgeConfig``)."""
    return JudgePlan(problem=node.problem, settings=part(node.fitness, EvalSettings),
                     policy=named_for_overrides(PrecisionPolicy.from_dict(asdict(node.fitness.policy))),
                     device=node.device, profile=node.hardware.profile)


def llm_plan(llm: Any) -> LLMPlan | None:
    """The ``llm`` part of a typed run config (``conf.schema.LLMConfig``); None for llm=none."""
    if llm is None:
        return None
    return LLMPlan(client=part(llm, LLMSettings), team=part(llm, TeamSettings), context=llm.context,
                   budget=llm.budget, provider=llm.provider, check=llm.check, initialise=llm.initialise)


def search_settings(search: Any) -> SearchSettings:
    """The search's settings of a typed ``search`` node (``conf.schema.SearchConfig``): its population, and its
    budget as one part."""
    return SearchSettings(**asdict(part(search, Population)), budget=part(search, Budget))


def run_plan(cfg: DictConfig, run: Any = None) -> RunPlan:
    """A run's plan from its composed config (``conf.schema.RunConfig``, or a bench's, whose run part it is; `run`:
    the config already ``typed``). KernelevoError naming a refused value."""
    run = typed(cfg) if run is None else run
    variants = run.inductor.variants
    return RunPlan(judge=judge_plan(run), search=search_settings(run.search), tuner=run.search.tuner,
                   operators=tuple(cfg.operators.list), selection=cfg.search.selection,
                   strategy=cfg.search.strategy, backend=cfg.fitness.backend, llm=llm_plan(run.llm),
                   variants=dict(variants) if variants else None, capture=part(run.inductor, CaptureSettings),
                   gpus=run.gpus, parallel=run.parallel,
                   config=OmegaConf.to_container(cfg, resolve=True))
