"""What `kernelevo bench` adds around ``evo.bench``: the table of an interrupted bench and the line that ends it."""
from __future__ import annotations

from pathlib import Path

from evo.bench import INTERRUPTED, NOT_STARTED, RUNS, BenchTask, Row, started


def interrupted_rows(tasks: list[BenchTask], rows: dict, bench_dir: Path) -> list[Row]:
    """Every task's row in an interrupted bench: its own (finished, or interrupted), else interrupted when its run
    began (a Ray task cancelled, a search cut short by a second Ctrl-C), else not started."""
    def row(task: BenchTask) -> Row:
        if rows.get(task.slug) is not None:
            return rows[task.slug]
        if started(bench_dir / RUNS / task.slug):
            return Row(task.name, INTERRUPTED, "its search was interrupted; resumable: the same command with this "
                                               "bench.dir continues it", search_seed=task.seed)
        return Row(task.name, NOT_STARTED, "the bench was interrupted before it began", search_seed=task.seed)
    return [row(task) for task in tasks]


def interrupted_line(rows: list[Row], bench_dir: Path) -> str:
    """The one line that ends an interrupted bench: what its directory keeps and the command that continues it."""
    finished = sum(1 for r in rows if r.status not in (INTERRUPTED, NOT_STARTED))
    cut = [r.label for r in rows if r.status == INTERRUPTED]
    resumable = f" (interrupted, resumable: {', '.join(cut)})" if cut else ""
    return (f"kernelevo: interrupted; {bench_dir} keeps {finished} of {len(rows)} problems finished{resumable}: "
            f"continue with the same command and bench.dir={bench_dir}")
