"""Each command's one typed plan, the one place a composed config becomes settings objects and plug-ins.

A command's plan (``Command.plan``) is made once from the config the command line composed, and checked there,
before Hydra writes anything; the command's task runs on it. A sweep's job (``--multirun``) makes its own from the
config Hydra composed for it; a bench's plan, with the bench (``kernelevo.benching``), is made of a run's.

The composed config is typed by the schema (``kernelevo.config.schema``); ``typed`` builds its dataclasses
(``OmegaConf.to_object``: every settings class's checks run there, once). The schema keeps the command line's flat
keys (``search.generations`` beside ``search.mu``; ``llm.model`` beside ``llm.edit_format``), so a node of it may
gather several settings classes by inheritance (``SearchConfig`` is a ``Budget`` and a ``Population``,
``LLMConfig`` an ``LLMSettings`` and a ``TeamSettings``, ``FitnessConfig`` an ``EvalSettings`` with the policy and
backend choices); ``part`` takes one of them out, by that class's own fields: the one rule by which every layer's
settings come out of the schema. The plug-ins (``_target_`` nodes: the operators, the selection, the strategy, the
evaluation backend) are made here, once each, by Hydra's ``instantiate`` (``plugin``), and the plan holds them.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from kernelevo.core.errors import KernelevoError
from evo.evolution.strategy import Evolution
from evo.plan import EvaluationBackend, RunPlan, Strategy
from evo.runs.run import CheckedRun
from evo.service.evaluation import LocalEvaluators
from evo.settings import Budget, Population, SearchSettings
from fitness.comparison.policy import PrecisionPolicy, named_for_overrides
from fitness.evaluation.plan import JudgePlan
from fitness.settings import EvalSettings
from operators.llm.settings import LLMPlan, LLMSettings, TeamSettings
from kernelevo.seeds.inductor.settings import CaptureSettings

log = logging.getLogger(__name__)


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


def plugin(node):
    """A plug-in made from its config node (``_target_``); a KernelevoError its class raises (a setting it refuses)
    as it is, not wrapped in Hydra's InstantiationException; any other failure is a bug and stays one."""
    try:
        return instantiate(node)
    except InstantiationException as exc:
        if isinstance(exc.__cause__, KernelevoError):
            raise exc.__cause__ from None
        raise


def build_strategy(node) -> Strategy:
    """The `search/strategy` plug-in (evo.evolution.strategy); evolution for a run saved before strategies existed."""
    return plugin(node) if node else Evolution()


def build_backend(node) -> EvaluationBackend:
    """The `fitness.backend` plug-in (conf/fitness/backend/): where the run's evaluators live; this host's for a run
    saved before backends existed. KernelevoError with the backend's own message when it cannot be made (Ray
    missing, a bad setting)."""
    return plugin(node) if node else LocalEvaluators()


def judge_plan(node: Any) -> JudgePlan:
    """The judge's part of a typed command config (``kernelevo.config.schema.JudgeConfig``)."""
    return JudgePlan(problem=node.problem, settings=part(node.fitness, EvalSettings),
                     policy=named_for_overrides(PrecisionPolicy.from_dict(asdict(node.fitness.policy))),
                     device=node.device, profile=node.hardware.profile)


def llm_plan(llm: Any) -> LLMPlan | None:
    """The ``llm`` part of a typed run config (``kernelevo.config.schema.LLMConfig``); None for llm=none."""
    if llm is None:
        return None
    return LLMPlan(client=part(llm, LLMSettings), team=part(llm, TeamSettings), context=llm.context,
                   budget=llm.budget, provider=llm.provider, check=llm.check, initialise=llm.initialise)


def search_settings(search: Any) -> SearchSettings:
    """The search's settings of a typed ``search`` node (``kernelevo.config.schema.SearchConfig``): its population,
    and its budget as one part."""
    return SearchSettings(**asdict(part(search, Population)), budget=part(search, Budget))


def run_plan(cfg: DictConfig, run: Any = None) -> RunPlan:
    """A run's plan from its composed config (``kernelevo.config.schema.RunConfig``, or a bench's, whose run part it
    is; `run`: the config already ``typed``), its plug-ins made. KernelevoError naming a refused value."""
    run = typed(cfg) if run is None else run
    variants = run.inductor.variants
    return RunPlan(judge=judge_plan(run), search=search_settings(run.search), tuner=run.search.tuner,
                   operators=tuple(plugin(op) for op in cfg.operators.list), selection=plugin(cfg.search.selection),
                   strategy=build_strategy(cfg.search.strategy), backend=build_backend(cfg.fitness.backend),
                   llm=llm_plan(run.llm), variants=dict(variants) if variants else None,
                   capture=part(run.inductor, CaptureSettings), gpus=run.gpus, parallel=run.parallel,
                   config=OmegaConf.to_container(cfg, resolve=True))


@dataclass(frozen=True)
class PlannedRun:
    """A run's plan and what ``evo.runs.run.check_run_config`` found checking it (the settings the run can carry)."""
    plan: RunPlan
    checked: CheckedRun


def planned_run(cfg: DictConfig, run=None, swept: bool = False) -> PlannedRun:
    """A new run's plan (a run's, a sweep job's, a bench's), checked: an LLM chosen that nothing would ask is refused,
    but in a sweep (`swept`), whose other runs may ask it (``operators=offline,llm``)."""
    from evo.runs.run import check_run_config
    from operators.llm.check import unused_llm

    plan = run_plan(cfg, run)
    checked = check_run_config(plan)
    if not swept:
        unused_llm(plan.operators, plan.llm)
    return PlannedRun(plan, checked)


def plan_run(cfg: DictConfig, overrides: list[str]) -> PlannedRun:
    return planned_run(cfg, swept=in_sweep(overrides))


def in_sweep(overrides: list[str]) -> bool:
    """Whether the run is one of a sweep: its command line sweeps a key, or it is a job of one."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    if any(o.is_sweep_override() for o in OverridesParser.create().parse_overrides(list(overrides))):
        return True
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


@dataclass(frozen=True)
class EvaluatePlan:
    judge: JudgePlan
    candidate: str | None  # a module defining ModelNew; None: the problem's seed
    out: str


def plan_evaluate(cfg: DictConfig, overrides: list[str]) -> EvaluatePlan:
    from fitness.evaluation.from_config import check_fitness_config, read_candidate

    node = typed(cfg)
    plan = EvaluatePlan(judge_plan(node), node.candidate, node.out)
    read_candidate(plan.candidate, check_fitness_config(plan.judge))
    return plan


@dataclass(frozen=True)
class SeedPlan:
    judge: JudgePlan
    variants: dict | None  # inductor.variants (None: Inductor's defaults only)
    out: str
    capture: CaptureSettings = field(default_factory=CaptureSettings)  # inductor.*: the capture's time


def plan_seed(cfg: DictConfig, overrides: list[str]) -> SeedPlan:
    from fitness.evaluation.from_config import check_fitness_config

    node = typed(cfg)
    plan = SeedPlan(judge_plan(node), dict(node.inductor.variants) or None, node.out,
                    part(node.inductor, CaptureSettings))
    check_fitness_config(plan.judge)
    return plan


@dataclass(frozen=True)
class ResumeRequest:
    """What `kernelevo resume` is asked, before it holds the run directory: the run, the budgets given."""
    run_dir: Path
    changes: dict  # key -> value, e.g. search.generations -> 8


@dataclass(frozen=True)
class ResumePlan:
    run_dir: Path
    run: PlannedRun  # the plan of the config the run store kept, the budgets given applied
    line: str  # what the resume says it does: its checkpoint, the budgets it changes
    note: str  # on patience ('' when none)


def given_keys(overrides: list[str]) -> list[str]:
    """The keys the command line sets (``hydra.*`` and run_dir left out)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(list(overrides))]
    return [key for key in keys if key != "run_dir" and not key.startswith("hydra")]


def request_resume(cfg: DictConfig, overrides: list[str]) -> ResumeRequest:
    """The run directory (it must hold a run: nothing is created where there is none) and the budgets given."""
    from evo.records.store import RunStore

    run_dir = Path(typed(cfg).run_dir)
    RunStore.check_exists(run_dir)
    return ResumeRequest(run_dir, {key: OmegaConf.select(cfg, key) for key in given_keys(overrides)})


def plan_resume(request: ResumeRequest) -> ResumePlan:
    """A resume's plan, made once the command holds the run directory (``Command.claimed``): from the config the
    run's store kept, the budgets given applied."""
    from kernelevo.resuming import check_resume, resumed_config

    run_dir, changes = request.run_dir, request.changes
    config, line = resumed_config(run_dir, changes)
    # a resume that would run nothing is refused, first: its search's settings tell
    note = check_resume(search_settings(typed(config.search)), run_dir, changes)
    plan = run_plan(config)
    from evo.runs.run import check_run_config

    return ResumePlan(run_dir, PlannedRun(plan, check_run_config(plan)), line, note)


def plan_report(cfg: DictConfig, overrides: list[str]) -> Path:
    """The run directory (it must hold a run: nothing is created where there is none)."""
    from evo.records.store import RunStore

    run_dir = Path(typed(cfg).run_dir)
    RunStore.check_exists(run_dir)
    return run_dir


def check_llm(run: PlannedRun, warn: bool = False) -> None:
    """The LLM the run would ask (``operators.llm.check``), checked as a user would: its key, its server, its model.
    `warn`: a failure is a printed line, not an error (a resume: the replies it needs may all be in the cache)."""
    from operators.llm.check import LLMCheckFailed, check_llm as check, uses_llm

    if not uses_llm(run.plan.operators, run.plan.llm):
        return
    try:
        line = check(run.plan.llm)
    except LLMCheckFailed as exc:
        if not warn:
            raise
        line = f"warning: {exc} (replies in the LLM cache replay; failed calls in a row stop the run)"
    if line:
        log.info(line)
