"""After `kernelevo run --multirun`: one combined page of its runs in the sweep directory (multirun.html, .md, .json:
the bench's table, each run linked to its report.html) and the table printed. A Hydra callback, configured in
conf/config.yaml (``hydra.callbacks``); Hydra calls it once every job of the sweep has returned."""
from __future__ import annotations

import json
import re
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

PAGE = "multirun"


class MultirunReport(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        write_multirun_report(Path(config.hydra.sweep.dir).resolve())


def run_dirs(sweep_dir: Path) -> list[Path]:
    """The sweep's run directories (each holding a run store), in job order (2 before 10)."""
    from evo.store import DB_NAME

    def job_order(path: Path) -> list:
        return [(0, int(part), "") if part.isdigit() else (1, 0, part)
                for part in re.split(r"(\d+)", str(path.relative_to(sweep_dir)))]

    return sorted((db.parent for db in sweep_dir.rglob(DB_NAME)), key=job_order)


def job_overrides(run_dir: Path) -> list[str]:
    """The overrides Hydra gave that job (its .hydra/overrides.yaml)."""
    path = run_dir / ".hydra" / "overrides.yaml"
    return [str(o) for o in OmegaConf.load(path)] if path.is_file() else []


def names(dirs: list[Path], sweep_dir: Path) -> tuple[dict, list[str]]:
    """Each run named by the overrides that set it apart from the others; and the overrides they all share."""
    overrides = {d: job_overrides(d) for d in dirs}
    common = [o for o in (overrides[dirs[0]] if dirs else []) if all(o in overrides[d] for d in dirs)]
    named = {d: " ".join(o for o in overrides[d] if o not in common) or str(d.relative_to(sweep_dir)) for d in dirs}
    if len(set(named.values())) < len(named):  # two jobs with the same overrides: their folders tell them apart
        named = {d: str(d.relative_to(sweep_dir)) for d in dirs}
    return named, common


def write_multirun_report(sweep_dir: Path) -> Path | None:
    """Write the sweep's combined page and print its table; None when the sweep holds no run."""
    from evo.bench import Row
    from evo.bench_report import console_table, run_reports, summary_lines, write_bench_report
    from evo.run import SUMMARY_FILE

    dirs = run_dirs(sweep_dir)
    if not dirs:
        return None
    named, common = names(dirs, sweep_dir)
    rows = []
    for d in dirs:
        summary_file = d / SUMMARY_FILE
        if not summary_file.is_file():
            rows.append(Row(named[d], "failed", f"the run did not finish (no {SUMMARY_FILE}); continue it with "
                                                f"kernelevo resume run_dir={d}"))
            continue
        s = json.loads(summary_file.read_text())
        rows.append(Row(named[d], s["status"], s.get("stop_reason", ""),
                        s.get("search_wall_s", 0.0) + s.get("baseline_wall_s", 0.0), "", s))
    reports = run_reports(sweep_dir, {named[d]: d for d in dirs})
    title = f"kernelevo multirun: {len(rows)} runs" + (f" ({' '.join(common)})" if common else "")
    summary = write_bench_report(sweep_dir, rows, title, {"common_overrides": common}, reports, stem=PAGE)
    print(f"[multirun] {title}\n" + console_table(rows, reports, sweep_dir))
    print("\n".join(f"[multirun] {line}" for line in summary_lines(summary)))
    page = sweep_dir / f"{PAGE}.html"
    print(f"[multirun] combined report: {page} (also {PAGE}.md, {PAGE}.json)", flush=True)
    return page
