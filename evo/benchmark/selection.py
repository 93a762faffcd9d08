"""The problems of a bench: a KernelBench selection (names, ids, paths, a list file, or a whole level under
``bench.root``) or bundled problems, as ``BenchTask``s, repeated over search seeds; and each level's size, which a
table's correct rate is also given over."""
from __future__ import annotations

import re
from pathlib import Path

from evo.benchmark.bench import BenchError, BenchTask
from fitness.problems.problem import suite_names


def _level_files(root: Path, level: int) -> list[Path]:
    folder = root / f"level{level}"
    if not folder.is_dir():
        raise BenchError(f"bench.root={root} has no level{level}/ folder; point bench.root at a KernelBench checkout's "
                         f"KernelBench/ folder (the one holding level1/, level2/, ...)")
    return sorted(folder.glob("*.py"), key=lambda p: (int(re.match(r"\d*", p.name).group() or 0), p.name))


def level_sizes(root: str | None) -> dict:
    """Each level's problems under a KernelBench checkout's KernelBench/ folder ({"level1": 100, ...}; {} without
    one): the whole level a table's correct rate is also given over."""
    base = Path(root).expanduser() if root else None
    if base is None or not base.is_dir():
        return {}
    return {p.name: len(list(p.glob("*.py"))) for p in sorted(base.glob("level*")) if p.is_dir()}


def _one(root: Path | None, item: str, level: int | None) -> BenchTask:
    item = item.strip()
    if root is None or item in suite_names():
        if item not in suite_names():
            raise BenchError(f"bench problem {item!r} is not a bundled problem ({', '.join(suite_names())}); for "
                             f"KernelBench problems set bench.root to a KernelBench checkout")
        return BenchTask(item, item)
    path = root / item
    if path.is_file():
        return BenchTask(f"{path.parent.name}/{path.name}", str(path.resolve()))
    lvl, _, ident = item.rpartition("/")
    lvl = lvl or (f"level{level}" if level else "")
    if ident.isdigit() and lvl:
        found = [p for p in _level_files(root, int(lvl.removeprefix("level"))) if p.name.startswith(f"{ident}_")]
        if found:
            return BenchTask(f"{lvl}/{found[0].name}", str(found[0].resolve()))
    raise BenchError(f"bench problem {item!r} not found under bench.root={root}; give a path relative to it "
                     f"(level1/23_Softmax.py), an id with its level (level1/23, or 23 with bench.level=1), or a "
                     f"bundled name")


def select(root: str | None, level: int | None, problems, overrides: tuple = ()) -> list[BenchTask]:
    """The bench's problems: `problems` (names, ids or paths; or the path of a list file, one per line) or, with
    none given, every problem of `level` under `root`."""
    base = Path(root).expanduser() if root else None
    if base is not None and not base.is_dir():
        raise BenchError(f"bench.root={root} is not a folder; point it at a KernelBench checkout's KernelBench/ "
                         f"folder")
    if isinstance(problems, str):
        listing = Path(problems).expanduser()
        if listing.is_file() and listing.suffix != ".py":
            problems = [line.strip() for line in listing.read_text().splitlines()
                        if line.strip() and not line.strip().startswith("#")]
        else:  # one problem's name, id or path: a list of one
            try:
                _one(base, problems, level)
            except BenchError as exc:
                raise BenchError(f"bench.problems={problems}: not a problem ({exc}), and neither a list nor an "
                                 f"existing list file; give bench.problems=NAME, bench.problems=[a,b] or the path "
                                 f"of a file with one problem per line") from None
            problems = [problems]
    if problems:
        tasks = [_one(base, str(p), level) for p in problems]
    elif level is not None and base is not None:
        tasks = [BenchTask(f"level{level}/{p.name}", str(p.resolve())) for p in _level_files(base, int(level))]
    else:
        raise BenchError("the bench selects no problem: set bench.problems (a list or a list file) or bench.root "
                         "with bench.level")
    seen = set()
    for task in tasks:
        if task.name in seen:
            raise BenchError(f"bench problem {task.name} is listed twice")
        seen.add(task.name)
    return [BenchTask(t.name, t.problem, tuple(overrides)) for t in tasks]


def with_seeds(tasks: list[BenchTask], seeds: int, first: int) -> list[BenchTask]:
    """Each task repeated over `seeds` search seeds (first, first + 1, ...: ``search.seed``), problem by problem;
    with one seed the tasks as they are (the run's own ``search.seed``, and a bench's folders as before)."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise BenchError(f"bench.seeds={seeds}: give the number of search seeds per problem, a whole number of at "
                         f"least 1 (e.g. --seeds 3)")
    if seeds == 1:
        return tasks
    own = lambda o: o.lstrip("+~").split("=", 1)[0] == "search.seed"  # noqa: E731 - the seeds set it
    return [BenchTask(t.name, t.problem, (*[o for o in t.overrides if not own(o)], f"search.seed={first + i}"),
                      first + i) for t in tasks for i in range(seeds)]
