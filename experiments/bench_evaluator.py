"""GPU benchmark of the evaluator (issue: fitness).

    run:   every bundled seed on its suite problem at full size (status, candidate / eager / compile time, speed-ups,
           speed-of-light fraction, evaluation wall time), the spread of one kernel evaluated N times, and the
           guards that only a GPU can exercise (unseen streams, the CUDA caching allocator, TF32 vs strict fp32).
    table: merge one or more JSON files written by `run` into the markdown table committed under
           experiments/results/.

    python3 experiments/bench_evaluator.py run --out OUT.json [--problems a,b] [--repeats 2] [--spread-runs 5]
                                           [--spread-problem a,b] [--guards]
    python3 experiments/bench_evaluator.py table A.json [B.json ...] > experiments/results/evaluator_<gpu>.md
"""
from __future__ import annotations

import json
import platform
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kernelevo.core.stats import geometric_mean  # noqa: E402
from experiments.bench_cli import environment, load_runs, main, problem_names, save  # noqa: E402
from fitness.evaluation.evaluator import EvalSettings, Evaluator  # noqa: E402
from fitness.common.formatting import microseconds, number, percent, speedup  # noqa: E402
from fitness.comparison.policy import load_policy  # noqa: E402
from fitness.problems.problem import resolve_problem  # noqa: E402
from hardware_profiles import detect_profile  # noqa: E402

CANDIDATES = REPO / "tests" / "candidates"
PHASES = ("fork", "cuda_init", "prewarm", "idle", "setup", "compile", "wait_shared", "trials", "first_call",
          "wait_exclusive", "timing")
SCALE_SHIFT = str(REPO / "tests" / "problems" / "scale_shift.py")


def evaluator(problem: str, policy: str = "triton", sizes: dict | None = None, **settings) -> Evaluator:
    return Evaluator(resolve_problem(problem, sizes=sizes), load_policy(policy), detect_profile(),
                     EvalSettings(**settings), device="cuda")


def bench_problem(name: str, repeats: int) -> dict:
    """The seed evaluated `repeats` times (each a fresh worker and a cold Triton cache, as a new candidate)."""
    seed = resolve_problem(name).seed_source()
    with evaluator(name) as ev:
        results = [ev.evaluate(seed, label="seed") for _ in range(repeats)]
        baseline_wall = ev.baseline_wall_s
    best = results[-1].to_dict()
    best["eval_wall_s_all"] = [r.eval_wall_s for r in results]
    best["phases_all"] = [r.phases_s for r in results]
    best["baseline_wall_s"] = baseline_wall
    best.pop("log_tail", None)
    return best


def bench_spread(name: str, runs: int, settings: dict | None = None) -> dict:
    """One kernel evaluated `runs` times in one evaluator: how much its median time moves between evaluations.
    `settings`: evaluator settings of this measurement (e.g. prestart_worker=False: no spare starting meanwhile)."""
    seed = resolve_problem(name).seed_source()
    with evaluator(name, baselines=["eager"], **(settings or {})) as ev:
        results = [ev.evaluate(seed) for _ in range(runs)]
    medians = [r.time_s for r in results]
    print(f"[spread] phases of the last evaluation: {results[-1].phases_s}", flush=True)
    mid = statistics.median(medians)
    return {"problem": name, "settings": settings or {}, "medians_s": medians,
            "range_rel": (max(medians) - min(medians)) / mid,
            "cv": statistics.pstdev(medians) / statistics.fmean(medians)}


GUARD_CASES = [
    # (what, problem, sizes, candidate file or "seed", policy, settings)
    ("correct kernel", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "good", "triton", {}),
    ("uninitialised output (CUDA caching allocator)", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096},
     "uninitialized_output", "triton", {}),
    ("result cached by input pointer", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "pointer_cache", "triton", {}),
    ("zeroes its input", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "zeroes_input", "triton", {}),
    ("torch compute + decorative kernel", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "torch_compute",
     "triton", {}),
    ("same, kernelbench policy", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "torch_compute", "kernelbench", {}),
    ("side stream, static check off, 64 MiB", SCALE_SHIFT, {"batch_size": 4096, "dim": 4096}, "side_stream",
     "triton", {"static_check": False}),
    ("side stream, static check off, 1 GiB", SCALE_SHIFT, {"batch_size": 16384, "dim": 16384}, "side_stream",
     "triton", {"static_check": False}),
    ("matmul seed (tl.dot, TF32), policy triton", "matmul", None, "seed", "triton", {}),
    ("matmul seed (tl.dot, TF32), policy strict-fp32", "matmul", None, "seed", "strict-fp32", {}),
]


def bench_guards() -> list[dict]:
    rows = []
    for what, problem, sizes, cand, policy, settings in GUARD_CASES:
        source = (resolve_problem(problem).seed_source() if cand == "seed"
                  else (CANDIDATES / f"{cand}.py").read_text())
        with evaluator(problem, policy, sizes, baselines=["eager"], **settings) as ev:
            r = ev.evaluate(source, label=cand)
        rows.append({"case": what, "status": r.status, "reason": r.reason.split("\n")[0][:160],
                     "time_s": r.time_s, "rel_l2": r.rel_l2, "label": r.label})
        print(f"[guards] {what}: {r.status} {r.reason[:120]}", flush=True)
    return rows


def _value(text: str):
    """A setting's value from the command line: JSON (true, 3, 0.5) or else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def run(args) -> None:
    out = {"environment": environment(profile=detect_profile().name, python=platform.python_version()),
           "command": " ".join(sys.argv), "problems": [], "spread": None, "guards": []}
    for name in problem_names(args):
        row = bench_problem(name, args.repeats)
        out["problems"].append(row)
        print(f"[bench] {name}: {row['status']} time={row['time_s']} x_eager={row['speedup_vs_eager']} "
              f"x_compile={row['speedup_vs_compile']} sol={row['sol_fraction']} wall={row['eval_wall_s_all']} "
              f"baseline_wall={row['baseline_wall_s']:.1f}s phases={row['phases_s']} {row['reason'][:200]}", flush=True)
        save(out, args.out)
    if args.spread_runs:
        settings = {k: _value(v) for k, v in (kv.split("=", 1) for kv in args.spread_settings)}
        out["spread"] = [bench_spread(name, args.spread_runs, settings) for name in args.spread_problem.split(",")]
        print(f"[spread] {out['spread']}", flush=True)
    if args.guards:
        out["guards"] = bench_guards()
    save(out, args.out)


# table ---------------------------------------------------------------------------------------------------------
def problem_table(rows: list[dict]) -> list[str]:
    lines = ["| problem | status | seed (us) | eager (us) | compile (us) | vs eager | vs compile | ref. roofline (us) "
             "| ref. roofline fraction | eval wall (s) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        walls = ", ".join(f"{w:.1f}" for w in r["eval_wall_s_all"])
        lines.append(f"| {r['problem']} | {r['status']} | {microseconds(r['time_s'])} | "
                     f"{microseconds(r['eager_s'])} | {microseconds(r['compile_s'])} | "
                     f"{speedup(r['speedup_vs_eager'])} | {speedup(r['speedup_vs_compile'])} | "
                     f"{microseconds(r['sol_s'])} | {percent(r['sol_fraction'], 1)} | {walls} |")
    return lines


def table(paths: list[str]) -> str:
    runs = load_runs(paths)
    rows = [r for run_ in runs for r in run_["problems"]]
    spread = next((r["spread"] for r in runs if r.get("spread")), None)
    guards = [g for r in runs for g in r.get("guards", [])]
    env = runs[0]["environment"]
    cold = [r["eval_wall_s_all"][0] for r in rows]
    warm = [w for r in rows for w in r["eval_wall_s_all"][1:]] or cold
    lines = [f"# Evaluator benchmark on {env['gpu']}", "",
             f"torch {env['torch']}, triton {env['triton']}, Python {env['python']}, {env['date']}; profile "
             f"`{env['profile']}`; policy `triton` (TF32 allowed for the seed and the baselines).", "",
             "Commands (on the GPU machine, repository root):", ""]
    lines += [f"    {r['command']}" for r in runs]
    lines += ["", "Each seed is evaluated as a new candidate (fresh worker, cold Triton cache) the number of times "
              "listed under eval wall; times are medians of CUDA-event timings with L2 flushed. "
              "Baselines (eager, torch.compile) are measured once per problem and excluded from eval wall.", ""]
    lines += problem_table(rows)
    lines += ["", "Geometric mean speed-up of the seeds: "
              f"{speedup(geometric_mean([r['speedup_vs_eager'] for r in rows]))} vs eager, "
              f"{speedup(geometric_mean([r['speedup_vs_compile'] for r in rows]))} vs torch.compile.",
              f"Evaluation wall time per candidate, warm worker (every evaluation after a problem's first, as in a "
              f"search): median {statistics.median(warm):.2f} s, max {max(warm):.2f} s over {len(warm)} evaluations; "
              f"the first evaluation of each problem, which waits for its worker's start-up: median "
              f"{statistics.median(cold):.2f} s.", ""]
    lines += ["Where a candidate's evaluation time goes (last evaluation of each seed; seconds; `fork`, `cuda_init`, "
              "`prewarm` and `idle` happen in the warm spare worker before the candidate is handed over):", "",
              "| problem | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    lines += [f"| {r['problem']} | " + " | ".join(f"{r['phases_s'].get(p, 0.0):.2f}" for p in PHASES) + " |"
              for r in rows]
    lines.append("")
    for one in spread or []:
        how = ", ".join(f"{k}={v}" for k, v in one.get("settings", {}).items())
        lines += [f"## Timing spread: `{one['problem']}` seed evaluated {len(one['medians_s'])} times"
                  + (f" ({how})" if how else ""), "",
                  "medians (us): " + ", ".join(f"{m * 1e6:.2f}" for m in one["medians_s"])
                  + f"; range / median = {one['range_rel']:.2%}, coefficient of variation = {one['cv']:.2%}", ""]
    if guards:
        lines += ["## Guards on the GPU", "", "| case | status | reason | time (us) | rel L2 |", "|---|---|---|---|---|"]
        lines += [f"| {g['case']} | {g['status']} | {g['reason'].replace('|', '/')} | {microseconds(g['time_s'])} | "
                  f"{number(g['rel_l2'], '{:.2e}')} |" for g in guards]
    return "\n".join(lines) + "\n"


def run_arguments(r) -> None:
    r.add_argument("--repeats", type=int, default=2)
    r.add_argument("--spread-runs", type=int, default=0)
    r.add_argument("--spread-settings", nargs="*", default=[],
                   help="evaluator settings, e.g. prestart_worker=false")
    r.add_argument("--spread-problem", default="elementwise_chain", help="comma-separated problem names")
    r.add_argument("--guards", action="store_true")


if __name__ == "__main__":
    main(__doc__, run, table, run_arguments)
