"""What `kernelevo bench` adds around ``evo.benchmark.bench``: its plan (``BenchPlan``: the runs' plan, the selection,
the intervals; ``plan_bench``, ``check_bench``), the table of an interrupted bench and the line that ends it; a
re-run into a bench directory compared with the runs it holds (``check_rerun``: refused when their settings differ
from the command's, naming the keys, unless ``bench.rerun=changed`` asks to run those problems again, their old runs
kept under ``replaced/``); the rows it keeps of problems the selection leaves out, which stay in its table."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from kernelevo.config.schema import BenchSettings
from kernelevo.core.errors import KernelevoError
from evo.benchmark.bench import FAILURES, INTERRUPTED, LOGS, NOT_STARTED, RESUMABLE, ROWS, RUNS, BenchTask, Row, started
from evo.benchmark.selection import select, with_seeds
from evo.reports.intervals import Bootstrap
from kernelevo.plans import PlannedRun, check_llm, planned_run, typed

REPLACED = "replaced"  # where bench.rerun=changed keeps the runs it makes again


def interrupted_rows(tasks: list[BenchTask], rows: dict, bench_dir: Path) -> list[Row]:
    """Every task's row in an interrupted bench: its own (finished, or interrupted), else interrupted when its run
    began (a Ray task cancelled, a search cut short by a second Ctrl-C), else not started."""
    def row(task: BenchTask) -> Row:
        if rows.get(task.slug) is not None:
            return rows[task.slug]
        if started(bench_dir / RUNS / task.slug):
            return Row(task.name, INTERRUPTED, f"its search was interrupted; {RESUMABLE}", search_seed=task.seed)
        return Row(task.name, NOT_STARTED, "the bench was interrupted before it began", search_seed=task.seed)
    return [row(task) for task in tasks]


def interrupted_line(rows: list[Row], bench_dir: Path) -> str:
    """The one line that ends an interrupted bench: what its directory keeps and the command that continues it."""
    finished = sum(1 for r in rows if r.status not in (INTERRUPTED, NOT_STARTED))
    cut = [r.label for r in rows if r.status == INTERRUPTED]
    resumable = f" (interrupted, resumable: {', '.join(cut)})" if cut else ""
    return (f"kernelevo: interrupted; {bench_dir} keeps {finished} of {len(rows)} problems finished{resumable}: "
            f"continue with the same command and bench.dir={bench_dir}")


# a bench re-run into a bench.dir whose runs were made with other settings ------------------------------------------
RERUN = ("changed",)  # bench.rerun's values (null: refuse)
OWN = ("bench", "hydra", "intervals")  # the bench's own settings, no run's
SHOWN = 4  # differing keys named per run


@dataclass(frozen=True)
class BenchPlan:
    run: PlannedRun  # what every problem's run is given
    bench: BenchSettings
    intervals: Bootstrap
    tasks: tuple  # evo.benchmark.bench.BenchTask: the selection, each search seed
    overrides: tuple  # the command line's settings of every run (its own bench.*, problem and hydra.* left out)


def plan_bench(cfg: DictConfig, overrides: list[str]) -> BenchPlan:
    node = typed(cfg)
    own = (*(f"{key}." for key in OWN), "bench/", "problem")  # the bench's own settings; the rest: every run
    kept = tuple(o for o in overrides if not o.lstrip("+~").startswith(own))
    bench = node.bench
    tasks = with_seeds(select(bench.root, bench.level, bench.problems, kept), bench.seeds, node.search.seed)
    return BenchPlan(planned_run(cfg, node), bench, node.intervals, tuple(tasks), kept)


def check_bench(plan: BenchPlan) -> None:
    """A bench's checks that reach outside its config: the LLM, the runs a given bench.dir holds."""
    check_llm(plan.run)
    if plan.bench.dir:  # its runs' settings against the command's (no bench.dir: a new one, nothing to compare)
        check_rerun(plan, Path(plan.bench.dir).expanduser().resolve())


def _flat(node, prefix: str = "") -> dict:
    """A config as {dotted key: value}; lists are values."""
    if not isinstance(node, dict) or not node and prefix:
        return {prefix: node}
    found = {}
    for key, value in node.items():
        found.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return found


def run_settings(config: dict) -> dict:
    """The settings the bench gives each of its runs (flattened), its own and the problem's name left out; `config`:
    the bench's composed config, resolved (its run plan's ``config``)."""
    settings = {k: v for k, v in config.items() if k not in OWN}
    return {key: value for key, value in _flat(settings).items() if key != "problem.name"}


def stored_settings(saved: dict) -> dict:
    """A stored run's settings (flattened, its keys missing from an older run at their defaults)."""
    from kernelevo.config.schema import run_config

    config = OmegaConf.to_container(run_config(saved), resolve=True)
    return {key: value for key, value in _flat({k: v for k, v in config.items() if k not in OWN}).items()
            if key != "problem.name"}


def value_text(value) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def changed_runs(config: dict, tasks: list[BenchTask], bench_dir: Path) -> dict[str, list[str]]:
    """Every run the bench directory holds whose stored settings differ from the command's: its folder name ->
    the keys that differ, each `key: stored -> now`. A run of a task of this selection is compared on its search
    seed too; one outside it (a problem left out now) on the rest."""
    from evo.records.store import RunStore

    runs = bench_dir / RUNS
    if not runs.is_dir():
        return {}
    expected, by_slug, changed = run_settings(config), {t.slug: t for t in tasks}, {}
    for run_dir in sorted(p for p in runs.iterdir() if p.is_dir()):
        saved = RunStore.saved_run(run_dir)
        if saved is None:
            continue
        try:
            stored = stored_settings(saved)
        except KernelevoError as exc:
            changed[run_dir.name] = [f"its config is of another kernelevo version ({exc})"]
            continue
        now = dict(expected)
        task = by_slug.get(run_dir.name)
        if task is None:  # its search seed is not this selection's to say
            now.pop("search.seed", None)
            stored.pop("search.seed", None)
        elif task.seed is not None:
            now["search.seed"] = task.seed
        keys = sorted((key for key in now.keys() | stored.keys() if now.get(key, None) != stored.get(key, None)),
                      key=lambda key: (not key.endswith(".name"), key))  # a group's choice (its name) first
        if keys:
            changed[run_dir.name] = [f"{key}: {value_text(stored.get(key))} -> {value_text(now.get(key))}"
                                     for key in keys]
    return changed


def check_rerun(plan: BenchPlan, bench_dir: Path) -> dict[str, list[str]]:
    """The runs to make again (``changed_runs``); KernelevoError naming them and the two ways on when there are any
    and bench.rerun does not ask for it."""
    rerun = plan.bench.rerun
    if rerun not in (None, *RERUN):
        raise KernelevoError(f"bench.rerun={rerun}: use bench.rerun=changed (run again the problems whose "
                             f"stored runs have other settings than the command's) or leave it out")
    changed = changed_runs(plan.run.plan.config, list(plan.tasks), bench_dir)
    if changed and rerun is None:
        first = [f"{name} ({'; '.join(keys[:SHOWN])}{f'; {len(keys) - SHOWN} more' if len(keys) > SHOWN else ''})"
                 for name, keys in list(changed.items())[:3]]
        more = f", and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise KernelevoError(f"bench.dir={bench_dir} holds {len(changed)} run{'s' if len(changed) > 1 else ''} made "
                             f"with other settings than this command's: {', '.join(first)}{more}; start a fresh bench "
                             f"in another bench.dir (or none: a new one under outputs/bench/), or run those problems "
                             f"again with these settings: bench.rerun=changed (their runs are kept under "
                             f"{bench_dir / REPLACED}/)")
    return changed


def set_aside(bench_dir: Path, names: list[str]) -> Path | None:
    """Move each named run (its folder, row, log and failure record) under REPLACED/<now>/, in the bench's layout; the
    folder."""
    if not names:
        return None
    into = bench_dir / REPLACED / time.strftime("%Y-%m-%d_%H-%M-%S")
    for name in names:
        for part in (Path(RUNS) / name, Path(ROWS) / f"{name}.json", Path(LOGS) / f"{name}.log",
                     Path(FAILURES) / f"{name}.json"):
            if (bench_dir / part).exists():
                (into / part).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(bench_dir / part, into / part)
    return into


def kept_rows(bench_dir: Path, tasks: list[BenchTask]) -> list[Row]:
    """The rows the bench directory keeps of problems this selection leaves out (they stay in its table)."""
    rows = bench_dir / ROWS
    selected = {t.slug for t in tasks}
    return [Row.from_json(p.read_text(), str(p)) for p in sorted(rows.glob("*.json")) if p.stem not in selected] \
        if rows.is_dir() else []
