"""Where a bench problem's evaluator start went on 4 x H200 (level3/23: 1,402 s, "the problem's cost model and input
dependence"; ``experiments/results/kernelbench_part7/``): per problem, the seconds ``find_dependence`` takes at the
test sizes by perturbation alone (a forward per tensor) and with the backward pass first, each with `--procs`
copies of the same decision running at once in their own processes, and whether the two decide the same. Every
process has OMP_NUM_THREADS=`--threads` (torch's default: every core). On the CPU::

    .venv/bin/python experiments/diagnostics/dependence_time.py --procs 1,4 --threads 1,2 \\
        ../shared/kernelbench/level3/{19_MobileNetV1,23_EfficientNetB1}.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ONE = """
import json, sys, time
from fitness.problems.dependence import find_dependence, small_spec
from fitness.problems.problem import load_problem, resolve_problem
loaded = load_problem(small_spec(resolve_problem(sys.argv[1])))
start = time.perf_counter()
decided = find_dependence(loaded, gradient=sys.argv[2] == "1")
print(json.dumps({"s": time.perf_counter() - start, "decided": decided.to_dict()}))
"""


def timed(problem: str, gradient: bool, procs: int, threads: int) -> dict:
    """`procs` processes deciding `problem` at once: the slowest one's seconds and the first one's decision."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.getcwd()}
    runs = [subprocess.Popen([sys.executable, "-c", ONE, problem, "1" if gradient else "0"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(procs)]
    answers = [json.loads(run.communicate()[0]) for run in runs]
    return {"s": max(a["s"] for a in answers), "decided": answers[0]["decided"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--procs", default="1")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    print("| problem | processes | threads | perturbation alone (s) | backward first (s) | same decision |")
    print("|---|---|---|---|---|---|")
    for problem in args.problems:
        for procs in map(int, args.procs.split(",")):
            for threads in map(int, args.threads.split(",")):
                started = time.perf_counter()
                alone, first = (timed(problem, gradient, procs, threads) for gradient in (False, True))
                rows.append({"problem": problem, "procs": procs, "threads": threads, "alone_s": alone["s"],
                             "gradient_s": first["s"], "same": alone["decided"] == first["decided"],
                             "wall_s": time.perf_counter() - started})
                print(f"| {os.path.basename(problem)} | {procs} | {threads} | {alone['s']:.1f} | {first['s']:.1f} "
                      f"| {'yes' if rows[-1]['same'] else 'no'} |", flush=True)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
