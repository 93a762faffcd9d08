"""GPU benchmark of the search (issues: search, throughput): `kernelevo run` with the offline operators on every
suite problem at a fixed budget, with the GPU's utilisation (NVML) and the machine's CPU use sampled while the
search runs (the one-off baseline timing of eager and torch.compile is excluded and shown apart).

    run:   python3 experiments/bench_search.py run --out OUT.json [--problems a,b] [-- hydra overrides...]
    table: python3 experiments/bench_search.py table A.json [B.json ...] > experiments/results/search_<gpu>.md

Per problem: speed-up of the best kernel over its seed, over eager and over torch.compile, fraction of the speed
of light, evaluations per hour, children and evaluations in flight, the share of the search's wall time the GPU
was busy (mean NVML utilisation), the machine's CPU use, and where an evaluation's time went (median seconds per
worker phase).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kernelevo.core.stats import geometric_mean  # noqa: E402
from experiments.bench_cli import environment, load_runs, main, problem_names, save  # noqa: E402
from experiments.timeline import STATES, gpu_timeline, start_up_lock_of  # noqa: E402
from fitness.common.formatting import microseconds, number, percent, speedup  # noqa: E402

BUDGET = ["search.generations=100", "search.mu=4", "search.lambda_=8", "search.tuner.trials=3",
          "search.patience=null", "search.wall_time_s=60"]
PHASES = ("fork", "cuda_init", "compile", "wait_memory", "setup", "wait_shared", "trials", "wait_exclusive", "timing")


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat (None-safe on machines without it)."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


def phase_medians(results) -> dict:
    """Median seconds of each worker phase over a run's evaluations that ran a worker."""
    out = {}
    for name in sorted({k for r in results for k in (r.phases_s or {})}):
        values = [r.phases_s[name] for r in results if r.phases_s and name in r.phases_s]
        out[name] = statistics.median(values)
    out["eval_wall"] = statistics.median([r.eval_wall_s for r in results]) if results else None
    return out


def bench_problem(name: str, overrides: list[str], root: Path, sampler) -> dict:
    from hydra import compose, initialize_config_dir

    from kernelevo.config import CONF_DIR
    from kernelevo.plans import run_plan
    from evo.runs.run import check_run_config, execute
    from evo.records.store import RunStore

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        plan = run_plan(compose("config", overrides=[f"problem={name}", *BUDGET, *overrides]))
    run_dir = root / name
    cpu_before, load_before = cpu_times(), os.getloadavg()[0]
    outcome = execute(plan, run_dir, check_run_config(plan))
    start, end = outcome.search_window
    cpu_after = cpu_times()
    busy_cpu = (cpu_after[0] - cpu_before[0]) / max(cpu_after[1] - cpu_before[1], 1.0)
    store = RunStore(run_dir, create=False)
    results = list(store.evaluations().values())
    config = store.get_meta("config")
    under_lock = start_up_lock_of(store)
    store.close()
    wall = end - start
    best = store_best(run_dir, outcome.best_id)
    children = config["search"].get("parallel") or config["search"]["lambda_"] * config["search"].get("islands", 1)
    return {"problem": name, "status": outcome.status, "wall_s": wall, "baseline_wall_s": outcome.baseline_wall_s,
            "evaluations": outcome.evaluations, "distinct": outcome.distinct_evaluations,
            "evals_per_hour": outcome.evaluations / wall * 3600, "gpu_busy": sampler.busy(start, end),
            "cpu_busy": busy_cpu, "load_average": os.getloadavg()[0], "load_average_before": load_before,
            "cores": os.cpu_count(), "children_in_flight": children, "evaluations_in_flight": config.get("parallel"),
            "phases_s": phase_medians(results),
            "start_up_under_lock": under_lock,
            "timeline": gpu_timeline(results, start, end, under_lock),
            "best_s": outcome.best_s, "seed_s": outcome.seed_written_s,  # the seed as written
            "tuned_seed_s": outcome.tuned_seed_s, "eager_s": outcome.eager_s, "compile_s": outcome.compile_s,
            "speedup_vs_eager": outcome.speedup_vs_eager, "speedup_vs_compile": outcome.speedup_vs_compile,
            "sol_fraction": outcome.sol_fraction, "stop_reason": outcome.stop_reason,
            "best_params": best.genome.params if best else None}


def store_best(run_dir: Path, best_id: str):
    """The run's best individual (None: none)."""
    from evo.records.store import RunStore

    if not best_id:
        return None
    store = RunStore(run_dir, create=False)
    try:
        return store.individual(best_id)
    finally:
        store.close()


def run(args) -> None:
    import torch

    out = {"environment": environment(), "budget": BUDGET + args.overrides, "problems": []}
    from evo.runs.progress import GpuBusySampler
    from fitness.common.gpu_lock import physical_gpu

    root = Path(args.runs_dir)
    sampler = GpuBusySampler([physical_gpu(f"cuda:{i}") for i in range(torch.cuda.device_count())]
                             if torch.cuda.is_available() else ())
    sampler.start()
    try:
        for name in problem_names(args):
            row = bench_problem(name, args.overrides, root, sampler)
            out["problems"].append(row)
            print(f"[search] {json.dumps(row, default=str)}", flush=True)
            save(out, args.out)
    finally:
        sampler.stop()


def _ratio(row: dict, seed_key: str) -> float | None:
    """How many times faster the best kernel is than the seed figure under seed_key."""
    seed, best = row.get(seed_key), row.get("best_s")
    return seed / best if seed and best else None


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def table(paths: list[str]) -> str:
    runs = load_runs(paths)
    rows = [{**r, "problem": f"{Path(p).stem}: {r['problem']}"} if len(paths) > 1 else r  # which file each row is
            for p, run_ in zip(paths, runs) for r in run_["problems"]]
    env = runs[0]["environment"]
    lines = [f"# Search benchmark on {env['gpu']}", "",
             f"torch {env['torch']}, triton {env['triton']}, {env['date']}. Offline operators, policy `triton`, "
             f"budget: `{' '.join(runs[0]['budget'])}`.", "",
             "| problem | best (us) | seed as written (us) | vs seed | vs eager | vs compile | ref. roofline fraction "
             "| evaluations | evals/hour | children / evals in flight | GPU busy | CPU busy | load avg | search wall (s) "
             "| baselines (s) | stopped |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sol = percent(r["sol_fraction"], 1)
        flight = f"{number(r.get('children_in_flight'), '{}')} / {number(r.get('evaluations_in_flight'), '{}')}"
        lines.append(f"| {r['problem']} | {microseconds(r['best_s'])} | {microseconds(r.get('seed_s'))} | "
                     f"{speedup(_ratio(r, 'seed_s'))} | {speedup(r['speedup_vs_eager'])} | "
                     f"{speedup(r['speedup_vs_compile'])} | {sol} | {r['evaluations']} | {r['evals_per_hour']:.0f} | "
                     f"{flight} | {percent(r['gpu_busy'], 1)} | {percent(r.get('cpu_busy'), 1)} | "
                     f"{number(r.get('load_average'), '{:.1f}')} | {r['wall_s']:.0f} | "
                     f"{number(r.get('baseline_wall_s'), '{:.1f}')} | {r['stop_reason']} |")

    def geo(key_fn):
        return geometric_mean(map(key_fn, rows))

    beats = [r for r in rows if (_ratio(r, "seed_s") or 0) > 1.0]
    total_evals, total_wall = sum(r["evaluations"] for r in rows), sum(r["wall_s"] for r in rows)
    lines += ["", f"Geometric means: {speedup(geo(lambda r: _ratio(r, 'seed_s')))} vs seed as written, "
              f"{speedup(geo(lambda r: r['speedup_vs_eager']))} vs eager, "
              f"{speedup(geo(lambda r: r['speedup_vs_compile']))} vs "
              f"torch.compile; faster than its seed as written on {len(beats)} of {len(rows)} problems. Over the "
              f"suite: {total_evals} evaluations in {total_wall:.0f} s of search = "
              f"{total_evals / max(total_wall, 1e-9) * 3600:,.0f} evaluations/hour; mean GPU busy "
              f"{percent(_mean([r['gpu_busy'] for r in rows]), 1)}, mean CPU busy "
              f"{percent(_mean([r.get('cpu_busy') for r in rows]), 1)}."]
    phased = [r for r in rows if r.get("phases_s")]
    if phased:
        names = [n for n in ("eval_wall", *PHASES) if any(n in r["phases_s"] for r in phased)]
        names += sorted({n for r in phased for n in r["phases_s"]} - set(names))
        lines += ["", "Where an evaluation's time went (median seconds per evaluation, from each worker's phase "
                  "timer; `eval_wall` is the evaluator's wall time for one candidate):", "",
                  "| problem | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        lines += [f"| {r['problem']} | " + " | ".join(number(r["phases_s"].get(n), "{:.2f}") for n in names) + " |"
                  for r in phased]
    timed = [r for r in rows if r.get("timeline")]
    if timed:
        lines += ["", "Where the search's wall time went, from the evaluations' spans (`experiments/timeline.py`: "
                  "a worker timing alone; holding the GPU shared while a timer waits; shared, no timer waiting; "
                  "evaluations in flight, none on the GPU; no evaluation in flight), and the mean evaluations in "
                  "flight:", "", "| problem | " + " | ".join(STATES) + " | in flight (mean) |",
                  "|---|" + "---|" * (len(STATES) + 1)]
        lines += [f"| {r['problem']} | " + " | ".join(percent(r["timeline"].get(s), 1) for s in STATES) +
                  f" | {number(r['timeline'].get('in_flight_mean'), '{:.1f}')} |" for r in timed]
    return "\n".join(lines) + "\n"


def run_arguments(r) -> None:
    r.add_argument("--runs-dir", default=f"/tmp/kernelevo-bench-{int(time.time())}")
    r.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. parallel=8")


if __name__ == "__main__":
    main(__doc__, run, table, run_arguments)
