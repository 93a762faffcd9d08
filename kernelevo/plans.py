"""Each command's one typed plan (``Command.plan``): made once from the config the command line composed, and
checked there, before Hydra writes anything; the command's task runs on it. A sweep's job (``--multirun``) makes
its own from the config Hydra composed for it. The settings objects come from ``conf.plan``; what a command adds
(its candidate, the run it resumes) is here; a bench's plan, with the bench (``kernelevo.benching``)."""
from __future__ import annotations

import logging

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from conf.plan import judge_plan, part, run_plan, search_settings, typed
from evo.plan import RunPlan
from evo.runs.run import CheckedRun
from fitness.evaluation.plan import JudgePlan
from seeds.inductor.settings import CaptureSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedRun:
    """A run's plan and what ``evo.runs.run.check_run_config`` built checking it (its operators, its strategy)."""
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
        unused_llm(checked.operators, plan.llm)
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

    if not uses_llm(run.checked.operators, run.plan.llm):
        return
    try:
        line = check(run.plan.llm)
    except LLMCheckFailed as exc:
        if not warn:
            raise
        line = f"warning: {exc} (replies in the LLM cache replay; failed calls in a row stop the run)"
    if line:
        log.info(line)
