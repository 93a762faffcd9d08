"""What a resume will do, said before it starts, and what an interrupted run keeps, said as it ends.

A resume given budgets (``search.generations=6``) that would still start no child is refused: the checkpoint's
state already meets a stop the budgets left in place (most often ``search.patience``: a run that stopped seeing no
improvement stops again at once, whatever its generations), and the message says how to lift each. A plain resume
(no budget given) of a finished run stays what it was: the summary and the report again, from the store. When
patience will end a resumed run before its generations do, a note says so, and how to lift it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from kernelevo.core.errors import KernelevoError

if TYPE_CHECKING:  # the CLI imports this module before any of the search's
    from evo.records.checkpoint import Checkpoint
    from evo.settings import Budget, SearchSettings

log = logging.getLogger(__name__)


def _generations(n: int, what: str = "") -> str:
    return f"{n} {what}generation{'' if n == 1 else 's'}"


LIFT = {  # how to lift each stop (evo.evolution.stopping.Stop), from what was spent against it
    "generations": lambda b, n: f"its {n:.0f} generations are done (search.generations above {n:.0f} extends it)",
    "patience": lambda b, n: (f"search.patience={b.patience} stops it at once: no improvement in its last "
                              f"{_generations(int(n))} (lift it: search.patience=null, or a value above {n:.0f})"),
    "max_evaluations": lambda b, n: (f"its {n:.0f} evaluations spend search.max_evaluations={b.max_evaluations} "
                                     f"(extend it: search.max_evaluations above {n:.0f})"),
    "max_gpu_s": lambda b, n: (f"its {n:.0f} evaluation-seconds spend search.max_gpu_s={b.max_gpu_s:g} (extend it: "
                               f"search.max_gpu_s above {n:.0f})"),
    "wall_time_s": lambda b, n: (f"its {n:.0f} s of search spend search.wall_time_s={b.wall_time_s:g} (extend it: "
                                 f"search.wall_time_s above {n:.0f})"),
}


def stops_at_once(budget: Budget, per_generation: int, checkpoint: Checkpoint | None, store) -> list[str]:
    """Why a search resumed with `budget` from `checkpoint` would stop before its first child, each with how to
    lift it; empty when it starts one. The search's own rule (``evo.evolution.stopping``) on the checkpoint's state and
    the run's store (its evaluations and their seconds)."""
    from evo.evolution import stopping

    if checkpoint is None:  # generation 0 is still to make
        return []
    next_generation = 1 + checkpoint.folded(per_generation) // per_generation
    stops = (stopping.ended(budget, next_generation, checkpoint.generation, checkpoint.stale)
             + stopping.spent(budget, store, checkpoint.elapsed_s))
    return [LIFT[stop.key](budget, stop.spent) for stop in stops]


def patience_note(budget: Budget, checkpoint: Checkpoint | None) -> str:
    """A note when patience will end the resumed search before its generations do ('' when it will not)."""
    if checkpoint is None or budget.patience is None:
        return ""
    generation, stale = checkpoint.generation, checkpoint.stale
    allowed = budget.patience - stale  # generations it may still make without improving
    if allowed >= budget.generations - generation:
        return ""
    since = f" (its last {_generations(stale)} brought none)" if stale else ""
    return (f"note: search.patience={budget.patience} ends it after {_generations(allowed, 'more ')} "
            f"without improvement{since}, before search.generations={budget.generations} would; "
            f"search.patience=null lifts it")


def check_resume(settings: SearchSettings, run_dir: Path, given: dict) -> str:
    """Raise KernelevoError when a resume given budgets (`given`: key -> value, applied in `settings`, the search's
    settings of the config ``resumed_config`` made) would run nothing; else the note on patience ('' when none).
    Prints nothing."""
    from evo.records.store import RunStore

    if not given:
        return ""
    store = RunStore(run_dir, create=False)
    try:
        checkpoint = store.latest_checkpoint()
        stops = stops_at_once(settings.budget, settings.per_generation, checkpoint, store)
    finally:
        store.close()
    if stops:
        asked = " ".join(f"{key}={'null' if value is None else value}" for key, value in given.items())
        raise KernelevoError(f"resuming {run_dir} with {asked} would run nothing: {'; '.join(stops)}")
    return patience_note(settings.budget, checkpoint)


def interrupted_run(run_dir: Path) -> str:
    """The line that ends an interrupted run: what its directory keeps, and the command that continues it."""
    from evo.records.store import RunStore

    if RunStore.saved_run(run_dir) is None:
        return f"kernelevo: interrupted before the run began in {run_dir}: nothing to resume (run it again)"
    store = RunStore(run_dir, create=False)
    try:
        checkpoint = store.latest_checkpoint()
    finally:
        store.close()
    when, kept = (("", f"its checkpoint of generation {checkpoint.generation} and ") if checkpoint is not None
                  else (" before generation 0 was finished", ""))
    return (f"kernelevo: interrupted{when}; {run_dir} keeps {kept}every evaluation that finished: continue with "
            f"kernelevo resume run_dir={run_dir}")


def saved_config(run_dir: Path) -> DictConfig:
    """The config a run was started with (or last resumed with), from its store."""
    from evo.records.meta import CONFIG
    from evo.records.store import RunStore

    store = RunStore(run_dir, create=False)
    config = store.get_meta(CONFIG)
    store.close()
    if config is None:
        raise KernelevoError(f"{run_dir}: the run store has no saved config; it was not made by `kernelevo run`")
    if "sampler" not in (config.get("search") or {}).get("tuner", {"sampler": None}):  # its tuner would change
        raise KernelevoError(f"{run_dir}: the run was saved before search.tuner.sampler and warm_start existed: start "
                             f"a new run")
    from kernelevo.config.schema import run_config

    return run_config(config)


def resumed_config(run_dir: Path, changes: dict) -> tuple[DictConfig, str]:
    """The run's saved config with `changes` (budgets: `search.generations` -> 10, ...) applied, and the line saying
    which checkpoint the run resumes from and what changed. KernelevoError for a budget of settings the run has not
    (``llm.budget.*`` of a run without an LLM)."""
    from evo.records.store import RunStore

    cfg = saved_config(run_dir)
    store = RunStore(run_dir, create=False)
    checkpoint, calls = store.latest_checkpoint(), store.evaluation_count()
    store.close()
    changed = []
    for key, value in changes.items():
        top = key.partition(".")[0]
        if OmegaConf.select(cfg, top) is None:  # llm.budget.* of a run without an LLM
            raise KernelevoError(f"{key}: the run in {run_dir} has no {top} settings to change ({top}=none); leave "
                                 f"{key} out")
        before = OmegaConf.select(cfg, key, default=None)
        if before != value:
            OmegaConf.update(cfg, key, value, force_add=True)
            changed.append(f"{key} {before} -> {value}")
    where = (f"its checkpoint of generation {checkpoint.generation}" if checkpoint is not None
             else "the start (no generation was finished)")
    return cfg, (f"resuming {run_dir} from {where}, {calls} evaluations done (finished ones are not repeated)"
                 + (f"; {', '.join(changed)}" if changed else ""))
