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
from experiments.bench_cli import environment, load_runs, main, problem_names, save  # noqa: E402
from experiments.timeline import STATES, gpu_timeline, start_up_lock_of  # noqa: E402

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
    from hydra import compose, initialize_config_module

    from evo.run import execute
    from evo.store import RunStore

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"problem={name}", *BUDGET, *overrides])
    run_dir = root / name
    cpu_before, load_before = cpu_times(), os.getloadavg()[0]
    summary = execute(cfg, run_dir)
    start, end = summary.search_window
    cpu_after = cpu_times()
    busy_cpu = (cpu_after[0] - cpu_before[0]) / max(cpu_after[1] - cpu_before[1], 1.0)
    store = RunStore(run_dir, create=False)
    results = list(store.evaluations().values())
    config = store.get_meta("config")
    under_lock = start_up_lock_of(store)
    store.close()
    wall = end - start
    best, seed = summary.best_result, summary.seed_result
    children = config["search"].get("parallel") or config["search"]["lambda_"] * config["search"].get("islands", 1)
    return {"problem": name, "status": best.status if best else "none", "wall_s": wall,
            "baseline_wall_s": summary.baseline_wall_s,
            "evaluations": summary.evaluations, "distinct": summary.distinct_evaluations,
            "evals_per_hour": summary.evaluations / wall * 3600, "gpu_busy": sampler.busy(start, end),
            "cpu_busy": busy_cpu, "load_average": os.getloadavg()[0], "load_average_before": load_before,
            "cores": os.cpu_count(), "children_in_flight": children, "evaluations_in_flight": config.get("parallel"),
            "phases_s": phase_medians(results),
            "start_up_under_lock": under_lock,
            "timeline": gpu_timeline(results, start, end, under_lock),
            "best_s": best.time_s if best and best.ok else None,
            "seed_s": seed.time_s if seed and seed.ok else None,  # the seed as written
            "tuned_seed_s": summary.tuned_seed_result.time_s
            if summary.tuned_seed_result and summary.tuned_seed_result.ok else None,
            "eager_s": best.eager_s if best else None, "compile_s": best.compile_s if best else None,
            "speedup_vs_eager": best.speedup_vs_eager if best else None,
            "speedup_vs_compile": best.speedup_vs_compile if best else None,
            "sol_fraction": best.sol_fraction if best else None, "stop_reason": summary.stop_reason,
            "best_params": summary.best.genome.params if summary.best else None}


def run(args) -> None:
    import torch

    out = {"environment": environment(), "budget": BUDGET + args.overrides, "problems": []}
    from evo.progress import GpuBusySampler
    from fitness.gpu_lock import physical_gpu

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


def _x(value) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _ratio(row: dict, seed_key: str) -> float | None:
    """How many times faster the best kernel is than the seed figure under seed_key."""
    seed, best = row.get(seed_key), row.get("best_s")
    return seed / best if seed and best else None


def _pct(value) -> str:
    return "–" if value is None else f"{value:.1%}"


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _us(value) -> str:
    return "–" if value is None else f"{value * 1e6:,.1f}"


def _num(value, fmt: str = "{:.0f}") -> str:
    return "–" if value is None else fmt.format(value)


def table(paths: list[str]) -> str:
    runs = load_runs(paths)
    rows = [{**r, "problem": f"{Path(p).stem}: {r['problem']}"} if len(paths) > 1 else r  # which file each row is
            for p, run_ in zip(paths, runs) for r in run_["problems"]]
    env = runs[0]["environment"]
    lines = [f"# Search benchmark on {env['gpu']}", "",
             f"torch {env['torch']}, triton {env['triton']}, {env['date']}. Offline operators, policy `triton`, "
             f"budget: `{' '.join(runs[0]['budget'])}`.", "",
             "| problem | best (us) | seed as written (us) | vs seed | vs eager | vs compile | SoL fraction "
             "| evaluations | evals/hour | children / evals in flight | GPU busy | CPU busy | load avg | search wall (s) "
             "| baselines (s) | stopped |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sol = "–" if r["sol_fraction"] is None else f"{r['sol_fraction']:.1%}"
        flight = f"{_num(r.get('children_in_flight'), '{}')} / {_num(r.get('evaluations_in_flight'), '{}')}"
        lines.append(f"| {r['problem']} | {_us(r['best_s'])} | {_us(r.get('seed_s'))} | {_x(_ratio(r, 'seed_s'))} | "
                     f"{_x(r['speedup_vs_eager'])} | {_x(r['speedup_vs_compile'])} | {sol} | {r['evaluations']} | "
                     f"{r['evals_per_hour']:.0f} | {flight} | {_pct(r['gpu_busy'])} | {_pct(r.get('cpu_busy'))} | "
                     f"{_num(r.get('load_average'), '{:.1f}')} | {r['wall_s']:.0f} | "
                     f"{_num(r.get('baseline_wall_s'), '{:.1f}')} | {r['stop_reason']} |")

    def geo(key_fn):
        values = [v for v in map(key_fn, rows) if v]
        return statistics.geometric_mean(values) if values else None

    beats = [r for r in rows if (_ratio(r, "seed_s") or 0) > 1.0]
    total_evals, total_wall = sum(r["evaluations"] for r in rows), sum(r["wall_s"] for r in rows)
    lines += ["", f"Geometric means: {_x(geo(lambda r: _ratio(r, 'seed_s')))} vs seed as written, "
              f"{_x(geo(lambda r: r['speedup_vs_eager']))} vs eager, {_x(geo(lambda r: r['speedup_vs_compile']))} vs "
              f"torch.compile; faster than its seed as written on {len(beats)} of {len(rows)} problems. Over the "
              f"suite: {total_evals} evaluations in {total_wall:.0f} s of search = "
              f"{total_evals / max(total_wall, 1e-9) * 3600:,.0f} evaluations/hour; mean GPU busy "
              f"{_pct(_mean([r['gpu_busy'] for r in rows]))}, mean CPU busy {_pct(_mean([r.get('cpu_busy') for r in rows]))}."]
    phased = [r for r in rows if r.get("phases_s")]
    if phased:
        names = [n for n in ("eval_wall", *PHASES) if any(n in r["phases_s"] for r in phased)]
        names += sorted({n for r in phased for n in r["phases_s"]} - set(names))
        lines += ["", "Where an evaluation's time went (median seconds per evaluation, from each worker's phase "
                  "timer; `eval_wall` is the evaluator's wall time for one candidate):", "",
                  "| problem | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        lines += [f"| {r['problem']} | " + " | ".join(_num(r["phases_s"].get(n), "{:.2f}") for n in names) + " |"
                  for r in phased]
    timed = [r for r in rows if r.get("timeline")]
    if timed:
        lines += ["", "Where the search's wall time went, from the evaluations' spans (`experiments/timeline.py`: "
                  "a worker timing alone; holding the GPU shared while a timer waits; shared, no timer waiting; "
                  "evaluations in flight, none on the GPU; no evaluation in flight), and the mean evaluations in "
                  "flight:", "", "| problem | " + " | ".join(STATES) + " | in flight (mean) |",
                  "|---|" + "---|" * (len(STATES) + 1)]
        lines += [f"| {r['problem']} | " + " | ".join(_pct(r["timeline"].get(s)) for s in STATES) +
                  f" | {_num(r['timeline'].get('in_flight_mean'), '{:.1f}')} |" for r in timed]
    return "\n".join(lines) + "\n"


def run_arguments(r) -> None:
    r.add_argument("--runs-dir", default=f"/tmp/kernelevo-bench-{int(time.time())}")
    r.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. parallel=8")


if __name__ == "__main__":
    main(__doc__, run, table, run_arguments)
