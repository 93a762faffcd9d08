"""What a resume will do, said before it starts, and what an interrupted run keeps, said as it ends.

A resume given budgets (``search.generations=6``) that would still start no child is refused: the checkpoint's
state already meets a stop the budgets left in place (most often ``search.patience``: a run that stopped seeing no
improvement stops again at once, whatever its generations), and the message says how to lift each. A plain resume
(no budget given) of a finished run stays what it was: the summary and the report again, from the store. When
patience will end a resumed run before its generations do, a note says so, and how to lift it.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def _generations(n: int, what: str = "") -> str:
    return f"{n} {what}generation{'' if n == 1 else 's'}"


def stops_at_once(cfg: DictConfig, checkpoint: dict | None, evaluations: int) -> list[str]:
    """Why a search resumed with `cfg` from `checkpoint` (its state) would stop before its first child, each with
    how to lift it; empty when it starts one. The checks of ``evo.search.Search._ended`` and ``_spent``, on the
    checkpoint's state."""
    if checkpoint is None:  # generation 0 is still to make
        return []
    s, generation, stale = cfg.search, checkpoint["generation"], checkpoint.get("stale", 0)
    stops = []
    if generation >= s.generations:
        stops.append(f"its {generation} generations are done (search.generations above {generation} extends it)")
    if s.patience is not None and generation > 0 and stale >= s.patience:
        stops.append(f"search.patience={s.patience} stops it at once: no improvement in its last "
                     f"{_generations(stale)} (lift it: search.patience=null, or a value above {stale})")
    if s.max_evaluations is not None and evaluations >= s.max_evaluations:
        stops.append(f"its {evaluations} evaluations spend search.max_evaluations={s.max_evaluations} (extend it: "
                     f"search.max_evaluations above {evaluations})")
    elapsed = checkpoint.get("elapsed_s", 0.0)
    if s.wall_time_s is not None and elapsed >= s.wall_time_s:
        stops.append(f"its {elapsed:.0f} s of search spend search.wall_time_s={s.wall_time_s:g} (extend it: "
                     f"search.wall_time_s above {elapsed:.0f})")
    return stops


def patience_note(cfg: DictConfig, checkpoint: dict | None) -> str:
    """A note when patience will end the resumed search before its generations do ('' when it will not)."""
    s = cfg.search
    if checkpoint is None or s.patience is None:
        return ""
    generation, stale = checkpoint["generation"], checkpoint.get("stale", 0)
    allowed = s.patience - stale  # generations it may still make without improving
    if allowed >= s.generations - generation:
        return ""
    since = f" (its last {_generations(stale)} brought none)" if stale else ""
    return (f"[kernelevo] note: search.patience={s.patience} ends it after {_generations(allowed, 'more ')} "
            f"without improvement{since}, before search.generations={s.generations} would; search.patience=null "
            f"lifts it")


def check_resume(run_dir: Path, given: dict) -> str:
    """Raise ValueError when a resume given budgets (`given`: key -> value, as ``evo.run.resume_config`` applies
    them) would run nothing; else the note on patience ('' when none). Prints nothing."""
    from evo.run import saved_config
    from evo.store import RunStore

    if not given:
        return ""
    cfg = saved_config(run_dir)
    for key, value in given.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    store = RunStore(run_dir, create=False)
    try:
        checkpoint, evaluations = store.latest_checkpoint(), store.evaluation_count()
    finally:
        store.close()
    stops = stops_at_once(cfg, checkpoint, evaluations)
    if stops:
        asked = " ".join(f"{key}={'null' if value is None else value}" for key, value in given.items())
        raise ValueError(f"resuming {run_dir} with {asked} would run nothing: {'; '.join(stops)}")
    return patience_note(cfg, checkpoint)


def interrupted_run(run_dir: Path) -> str:
    """The line that ends an interrupted run: what its directory keeps, and the command that continues it."""
    from evo.store import RunStore

    if RunStore.saved_run(run_dir) is None:
        return f"kernelevo: interrupted before the run began in {run_dir}: nothing to resume (run it again)"
    store = RunStore(run_dir, create=False)
    try:
        checkpoint = store.latest_checkpoint()
    finally:
        store.close()
    when, kept = (("", f"its checkpoint of generation {checkpoint['generation']} and ") if checkpoint is not None
                  else (" before generation 0 was finished", ""))
    return (f"kernelevo: interrupted{when}; {run_dir} keeps {kept}every evaluation that finished: continue with "
            f"kernelevo resume run_dir={run_dir}")
