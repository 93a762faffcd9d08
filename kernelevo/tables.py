"""`kernelevo table bench_dirs=[A,B,...] out=DIR`: one table over several bench directories, for a benchmark run in
parts (KernelBench's levels over several leases of GPU time: a ``bench.dir`` per level, or per machine). Each
directory's rows (``rows/*.json``) are gathered; a problem (and search seed) held by two of them is compared on its
runs' stored settings (``kernelevo.benching.stored_settings``: every run setting, the bench's own left out): with
other settings the table is refused, naming the problem, the directories and the keys; with the same settings the
later directory's row is kept (a re-run of a part), and a line says so. The table is written as the bench writes
its own (``evo.benchmark.bench_report``; per level, fast_p, failures by cause) into DIR as table.md, table.json,
table.html, each problem linked to its run's report.html where it is.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from omegaconf import DictConfig

from kernelevo.core.errors import KernelevoError
from evo.benchmark.bench import ROWS, RUNS, Row, slug
from evo.benchmark.selection import level_sizes
from evo.benchmark.bench_report import console_table, summary_lines, write_bench_report
from kernelevo.plans import typed
from evo.reports.report import HTML_FILE
from evo.records.store import RunStore
from kernelevo.benching import SHOWN, stored_settings, value_text

STEM = "table"  # table.md, table.json, table.html
BENCH_JSON = "bench.json"  # a bench's own table, whose meta says its KernelBench level sizes


def bench_folder(text: str) -> Path:
    """A bench directory of `bench_dirs`, checked: it holds a bench's rows (KernelevoError naming the fix)."""
    folder = Path(text).expanduser().resolve()
    if not (folder / ROWS).is_dir():
        raise KernelevoError(f"bench_dirs: {text} holds no bench (no {ROWS}/ folder in it); give the bench.dir of each "
                             f"`kernelevo bench` to gather, e.g. bench_dirs=[B/level1,B/level2]")
    return folder


def check_table(cfg: DictConfig):
    """Before anything is written: each directory a bench's, none named twice, no problem held by two of them with
    other settings (``gather``)."""
    plan = typed(cfg)  # the command's typed plan (kernelevo.plans): TableConfig, its intervals a Bootstrap
    dirs = [bench_folder(d) for d in plan.bench_dirs]
    if len(set(dirs)) != len(dirs):
        raise KernelevoError(f"bench_dirs names a directory twice ({', '.join(str(d) for d in plan.bench_dirs)}); give "
                             f"each bench directory once")
    gather(dirs, plan.later_wins)
    return plan


def _settings(run_dir: Path) -> dict | None:
    """A run's stored settings (None: no run store there, e.g. a problem whose run failed before it began)."""
    saved = RunStore.saved_run(run_dir) if run_dir.is_dir() else None
    if saved is None:
        return None
    try:
        return stored_settings(saved)
    except KernelevoError:
        return None


def differing(a: dict | None, b: dict | None) -> list[str]:
    """The keys two runs' settings differ on, `key: a -> b` ([] when either is unknown)."""
    if a is None or b is None:
        return []
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return [f"{k}: {value_text(a.get(k))} -> {value_text(b.get(k))}" for k in keys]


def gather(folders: list[Path], later_wins: bool = False) -> tuple[list[Row], dict, list[str]]:
    """The rows of every bench directory, one per problem and search seed: (rows, row label -> its run directory,
    lines saying which duplicates were resolved). KernelevoError naming a problem held with other settings, unless
    `later_wins`: then the later directory's row is kept and its line names the keys."""
    kept: dict[str, tuple[Path, Row]] = {}
    lines, clashes = [], []
    for folder in folders:
        for path in sorted((folder / ROWS).glob("*.json")):
            row = Row.from_json(path.read_text(), str(path))
            key = slug(row.name, row.search_seed)
            if key in kept:
                before, _ = kept[key]
                keys = differing(_settings(before / RUNS / key), _settings(folder / RUNS / key))
                if keys and later_wins:
                    lines.append(f"{row.label}: in {before} and {folder} with other settings ({'; '.join(keys)}); "
                                 f"the row of {folder} (the later in bench_dirs, later_wins) is kept")
                elif keys:
                    more = f"; {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
                    clashes.append(f"{row.label} is in {before} and {folder} with other settings "
                                   f"({'; '.join(keys[:SHOWN])}{more})")
                    continue
                else:
                    lines.append(f"{row.label}: in {before} and {folder} with the same settings; the row of "
                                 f"{folder} (the later in bench_dirs) is kept")
            kept[key] = (folder, row)
    if clashes:
        raise KernelevoError(f"{clashes[0]}" + (f", and {len(clashes) - 1} more problem(s) so" if len(clashes) > 1
                                             else "") +
                             "; one table holds one setting per problem: leave one of those directories out of "
                             "bench_dirs, run the problem again in one of them with the other's settings "
                             "(kernelevo bench ... bench.dir=DIR bench.rerun=changed), or keep the later directory's "
                             "row (later_wins=true)")
    rows = [row for _, row in kept.values()]
    return rows, {row.label: folder / RUNS / slug(row.name, row.search_seed) for folder, row in kept.values()}, lines


def sizes_of(folders: list[Path], root: str | None) -> dict:
    """Each KernelBench level's problems: counted under `root`, else as the benches' own tables recorded them."""
    if root:
        return level_sizes(root)
    found: dict = {}
    for folder in folders:
        table = folder / BENCH_JSON
        if table.is_file():
            found.update(json.loads(table.read_text()).get("level_sizes") or {})
    return found


def write_table(cfg) -> None:
    """`cfg`: the table command's plan (``check_table``)."""
    folders = [bench_folder(d) for d in cfg.bench_dirs]
    out = Path(cfg.out).expanduser().resolve()
    rows, run_dirs, lines = gather(folders, cfg.later_wins)
    for line in lines:
        print(f"[table] {line}", flush=True)
    reports = {label: os.path.relpath(d / HTML_FILE, out) for label, d in run_dirs.items() if (d / HTML_FILE).is_file()}
    title = cfg.title or f"kernelevo: {len({r.name for r in rows})} problems from {len(folders)} bench directories"
    out.mkdir(parents=True, exist_ok=True)
    summary = write_bench_report(out, rows, title, {"bench_dirs": [str(f) for f in folders],
                                                    "level_sizes": sizes_of(folders, cfg.root)}, reports, stem=STEM,
                                 boot=cfg.intervals)
    print(console_table(rows, reports, out))
    print("\n".join(f"[table] {line}" for line in summary_lines(summary)))
    print(f"[table] {out / (STEM + '.md')} (also {STEM}.json, {STEM}.html)", flush=True)
