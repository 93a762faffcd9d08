"""Where a bench problem's evaluator start went on 4 x H200 (level3/23: 1,402 s, "the problem's cost model and input
dependence"; ``experiments/results/kernelbench_part7/``): per problem, the seconds ``find_dependence`` takes at the
test sizes by perturbation alone (a forward per tensor) and with the backward pass first, each with `--procs`
copies of the same decision running at once in their own processes, and whether the two decide the same. Every
process has OMP_NUM_THREADS=`--threads` (torch's default: every core). On the CPU::

    .venv/bin/python experiments/diagnostics/dependence_time.py --procs 1,4 --threads 1,2 \\
        ../shared/kernelbench/level3/{19_MobileNetV1,23_EfficientNetB1}.py

`--differences` instead: in this one process, every problem's two decisions compared, and a row for each problem
whose decision differs (what changed) or that could not be decided, then a count::

    OMP_NUM_THREADS=1 .venv/bin/python experiments/diagnostics/dependence_time.py --differences \\
        ../shared/kernelbench/level{1,2,3}/*.py
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


def differences(problems: list[str]) -> None:
    """In this process, each problem's decision by perturbation alone and with the backward pass first."""
    from fitness.problems.dependence import find_dependence, small_spec
    from fitness.problems.problem import load_problem, resolve_problem

    print("| problem | counted now, ignored by perturbation alone | ignored now, counted before |")
    print("|---|---|---|")
    same = 0
    for problem in problems:
        try:
            loaded = load_problem(small_spec(resolve_problem(problem)))
            alone, first = (find_dependence(loaded, gradient=gradient) for gradient in (False, True))
        except Exception as exc:  # noqa: BLE001 - a problem the CPU cannot run at its test sizes is a row
            print(f"| {problem} | not decided: {type(exc).__name__}: {str(exc)[:100]} | - |", flush=True)
            continue
        inputs = [f"input {i}" for i, (a, b) in enumerate(zip(alone.inputs, first.inputs)) if a != b]
        gained = sorted(set(alone.ignored_parameters) - set(first.ignored_parameters))
        lost = sorted(set(first.ignored_parameters) - set(alone.ignored_parameters))
        if not inputs and not gained and not lost:
            same += 1
            continue
        more = f" (+{len(gained) - 6})" if len(gained) > 6 else ""
        print(f"| {problem} | {', '.join(inputs + gained[:6]) + more} | {', '.join(lost) or '-'} |", flush=True)
    print(f"\n{same} of {len(problems)} decided the same.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--procs", default="1")
    parser.add_argument("--threads", default="1")
    parser.add_argument("--out")
    parser.add_argument("--differences", action="store_true")
    args = parser.parse_args()
    if args.differences:
        return differences(args.problems)
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
