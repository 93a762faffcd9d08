"""What the GPU benchmark scripts (``bench_evaluator.py``, ``bench_search.py``) share: the machine a run was on, and
a command line of two commands: ``run`` (measure every suite problem, or ``--problems a,b``, into ``--out`` JSON,
rewritten after each problem) and ``table`` (merge JSON files into the markdown committed under experiments/results/).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def environment(**extra) -> dict:
    """The GPU (or the interpreter), torch and triton versions and the date, with `extra` (e.g. the profile)."""
    import torch
    import triton

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU (Triton interpreter)"
    return {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__, **extra,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def problem_names(args) -> list[str]:
    """The problems of `run --problems a,b`; every suite problem when none are named."""
    from fitness.problems.problem import suite_names

    return args.problems.split(",") if args.problems else suite_names()


def save(out: dict, path: str) -> None:
    Path(path).write_text(json.dumps(out, indent=1, default=str))


def load_runs(paths: list[str]) -> list[dict]:
    return [json.loads(Path(p).read_text()) for p in paths]


def main(doc: str, run, table, run_arguments=lambda parser: None) -> None:
    """Parse `run ...` (``--out``, ``--problems`` and what `run_arguments` adds) or `table JSON...`, then call
    `run(args)` or print `table(paths)`."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--problems", default="", help="comma-separated; empty = every suite problem")
    run_arguments(r)
    t = sub.add_parser("table")
    t.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    else:
        print(table(args.paths), end="")
