"""Where an RNN problem's evaluator start went on 4 x H200 (level3/38: 196.5 s, "the problem's cost model and input
dependence"; ``experiments/results/kernelbench_part8/``): per problem, the seconds of the shrink rule
(``fitness.problems.dependence.small_spec``: the interpreter's sizes, chosen by forwards on the meta device) and of
the cost model at the file's sizes (``fitness.problems.speed_of_light.measure_cost``: one forward on the meta
device, FLOPs counted), in this process, and the sizes the rule chose. On the CPU, one thread::

    OMP_NUM_THREADS=1 .venv/bin/python experiments/diagnostics/shrink_time.py \\
        ../shared/kernelbench/level3/{35,36,37,38,39,40,41,42}_*.py

Another tree's copy of this script times that tree's code.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the tree this copy is in, as the other scripts do


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    from fitness.problems.dependence import small_spec
    from fitness.problems.problem import load_problem, resolve_problem
    from fitness.problems.speed_of_light import measure_cost

    print("| problem | shrink rule (s) | cost model at the file's sizes (s) | interpreter's sizes |")
    print("|---|---|---|---|")
    for path in args.files:
        spec = resolve_problem(path, size_preset="full")
        start = time.perf_counter()
        small = small_spec(spec)
        shrink = time.perf_counter() - start
        start = time.perf_counter()
        try:
            measure_cost(load_problem(spec))
            cost = f"{time.perf_counter() - start:.1f}"
        except Exception as exc:  # noqa: BLE001 - a forward the meta device cannot run (the product says so too)
            cost = f"none: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        sizes = ", ".join(f"{k}={v}" for k, v in small.sizes.items()) or small.size_note
        print(f"| {os.path.basename(path)} | {shrink:.1f} | {cost} | {sizes} |", flush=True)


if __name__ == "__main__":
    main()
