"""After `kernelevo run --multirun`: one combined page of its runs in the sweep directory (multirun.html, .md, .json:
the bench's table, each run linked to its report.html) and the table printed. A Hydra callback, configured in
conf/config.yaml (``hydra.callbacks``); Hydra calls it once every job of the sweep has returned.

A sweep over search seeds (``search.seed=0,1,2``, or ``kernelevo run --seeds 3``) is a table of several seeds per
configuration, as a bench's with ``--seeds``: the runs that differ in their seed alone are one row group, with the
median speed-up and its confidence interval (``evo.reports.intervals``).

A job that failed (its error said, or an exception: ``kernelevo.cli.in_job``) leaves its failure's record in its
folder (``evo.runs.failure.RunFailure.keep``) and is its row in the tables, the sweep going on with its other
jobs."""
from __future__ import annotations

import re
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from evo.runs.failure import FAILED_FILE, RunFailure

PAGE = "multirun"
SEED_KEY = "search.seed"  # a sweep over it is a table of several seeds per configuration


class MultirunReport(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        boot = OmegaConf.to_object(config.intervals) if "intervals" in config else None  # evo.reports.intervals.Bootstrap
        write_multirun_report(Path(config.hydra.sweep.dir).resolve(), boot)


def run_dirs(sweep_dir: Path) -> list[Path]:
    """The sweep's run directories (each holding a run store, or a failed job's record), in job order (2 before
    10)."""
    from evo.records.store import DB_NAME

    def job_order(path: Path) -> list:
        return [(0, int(part), "") if part.isdigit() else (1, 0, part)
                for part in re.split(r"(\d+)", str(path.relative_to(sweep_dir)))]

    found = {path.parent for name in (DB_NAME, FAILED_FILE) for path in sweep_dir.rglob(name)}
    return sorted(found, key=job_order)


def job_overrides(run_dir: Path) -> list[str]:
    """The overrides Hydra gave that job (its .hydra/overrides.yaml)."""
    path = run_dir / ".hydra" / "overrides.yaml"
    return [str(o) for o in OmegaConf.load(path)] if path.is_file() else []


def job_seed(overrides: list[str]) -> int | None:
    """The search seed a job's overrides set (``search.seed=N``), or None."""
    values = [o.partition("=")[2] for o in overrides if o.lstrip("+~").partition("=")[0] == SEED_KEY]
    return int(values[-1]) if values and values[-1].lstrip("-").isdigit() else None


def names(dirs: list[Path], sweep_dir: Path) -> tuple[dict, list[str], dict]:
    """Each run named by the overrides that set it apart from the others; the overrides they all share; and each
    run's search seed where the sweep repeats runs over several (else None), its seed then no part of its name
    (a name may be "" where the seed alone sets the runs apart)."""
    overrides = {d: job_overrides(d) for d in dirs}
    seeds = {d: job_seed(overrides[d]) for d in dirs}
    seeded = len(set(seeds.values())) > 1
    if seeded:
        overrides = {d: [o for o in found if job_seed([o]) is None] for d, found in overrides.items()}
    else:
        seeds = dict.fromkeys(dirs)
    common = [o for o in (overrides[dirs[0]] if dirs else []) if all(o in overrides[d] for d in dirs)]
    named = {d: " ".join(o for o in overrides[d] if o not in common) or
             ("" if seeded else str(d.relative_to(sweep_dir))) for d in dirs}
    if len({(named[d], seeds[d]) for d in dirs}) < len(dirs):  # two jobs with the same overrides: their folders
        named, seeds = {d: str(d.relative_to(sweep_dir)) for d in dirs}, dict.fromkeys(dirs)  # tell them apart
    return named, common, seeds


def write_multirun_report(sweep_dir: Path, boot=None) -> Path | None:
    """Write the sweep's combined page and print its table (its intervals made as `boot`, an
    ``evo.reports.intervals.Bootstrap``, says; by default conf/intervals.yaml); None when the sweep holds no run."""
    from evo.benchmark.bench import Row
    from evo.benchmark.bench_report import console_table, run_reports, summary_lines, write_bench_report
    from evo.reports.outcome import SUMMARY_FILE, RunOutcome

    dirs = run_dirs(sweep_dir)
    if not dirs:
        return None
    named, common, seeds = names(dirs, sweep_dir)
    outcomes = {d: RunOutcome.read(d) for d in dirs if (d / SUMMARY_FILE).is_file()}
    same = next((o.problem for o in outcomes.values() if o.problem), "runs")  # the seed alone differs
    rows = []
    for d in dirs:
        failed = RunFailure.kept(d)
        if failed is not None:
            rows.append(Row(named[d] or same, "failed", failed.message, search_seed=seeds[d], problem=failed.problem,
                            failure=failed))
            continue
        if d not in outcomes:
            rows.append(Row(named[d] or same, "failed", f"the run did not finish (no {SUMMARY_FILE}); continue it "
                                                        f"with kernelevo resume run_dir={d}", search_seed=seeds[d]))
            continue
        o = outcomes[d]
        wall = (o.search_wall_s or 0.0) + (o.baseline_wall_s or 0.0) + (o.seed_wall_s or 0.0)
        rows.append(Row(named[d] or same, o.status, o.stop_reason, wall, "", o, seeds[d], o.problem))
    reports = run_reports(sweep_dir, {r.label: d for d, r in zip(dirs, rows)})
    title = f"kernelevo multirun: {len(rows)} runs" + (f" ({' '.join(common)})" if common else "")
    summary = write_bench_report(sweep_dir, rows, title, {"common_overrides": common}, reports, stem=PAGE,
                                 boot=boot)
    print(f"[multirun] {title}\n" + console_table(rows, reports, sweep_dir))
    print("\n".join(f"[multirun] {line}" for line in summary_lines(summary)))
    page = sweep_dir / f"{PAGE}.html"
    print(f"[multirun] combined report: {page} (also {PAGE}.md, {PAGE}.json)", flush=True)
    return page
