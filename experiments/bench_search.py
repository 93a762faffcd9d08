"""GPU benchmark of the search (issue: search): `kernelevo run` with the offline operators on every suite problem at
a fixed budget, with the GPU's utilisation sampled through NVML while it runs.

    run:   python3 experiments/bench_search.py run --out OUT.json [--problems a,b] [-- hydra overrides...]
    table: python3 experiments/bench_search.py table A.json [B.json ...] > experiments/results/search_<gpu>.md

Per problem: speed-up of the best kernel over its seed, over eager and over torch.compile, fraction of the speed
of light, evaluations per hour, and the share of the run's wall time the GPU was busy (mean NVML utilisation).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BUDGET = ["search.generations=3", "search.mu=4", "search.lambda_=6", "search.tuner.trials=3",
          "search.patience=null", "search.wall_time_s=60"]


class UtilisationSampler(threading.Thread):
    """Mean GPU utilisation (NVML: share of time a kernel was running) over the sampler's life."""

    def __init__(self, index: int = 0, period_s: float = 0.1):
        super().__init__(daemon=True)
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:  # no NVML (CPU machine): no utilisation figure
            self._nvml = self._handle = None
        self.period_s = period_s
        self.samples: list[int] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while self._nvml is not None and not self._halt.is_set():
            self.samples.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            time.sleep(self.period_s)

    def stop(self) -> float | None:
        self._halt.set()
        self.join()
        return statistics.fmean(self.samples) / 100 if self.samples else None


def bench_problem(name: str, overrides: list[str], root: Path) -> dict:
    from hydra import compose, initialize_config_module

    from evo.run import execute

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose("config", overrides=[f"problem={name}", *BUDGET, *overrides])
    run_dir = root / name
    sampler = UtilisationSampler()
    sampler.start()
    start = time.perf_counter()
    summary = execute(cfg, run_dir)
    wall = time.perf_counter() - start
    busy = sampler.stop()
    best, seed = summary.best_result, summary.seed_result
    return {"problem": name, "status": best.status if best else "none", "wall_s": wall,
            "evaluations": summary.evaluations, "distinct": summary.distinct_evaluations,
            "evals_per_hour": summary.evaluations / wall * 3600, "gpu_busy": busy,
            "best_s": best.time_s if best and best.ok else None,
            "seed_s": seed.time_s if seed and seed.ok else None,  # the seed as written
            "tuned_seed_s": summary.tuned_seed_result.time_s
            if summary.tuned_seed_result and summary.tuned_seed_result.ok else None,
            "eager_s": best.eager_s if best else None, "compile_s": best.compile_s if best else None,
            "speedup_vs_eager": best.speedup_vs_eager if best else None,
            "speedup_vs_compile": best.speedup_vs_compile if best else None,
            "sol_fraction": best.sol_fraction if best else None, "stop_reason": summary.stop_reason,
            "best_params": summary.best.params if summary.best else None}


def run(args) -> None:
    import torch
    import triton

    from fitness.problem import suite_names

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU (Triton interpreter)"
    out = {"environment": {"gpu": gpu, "torch": torch.__version__,
                           "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
           "budget": BUDGET + args.overrides, "problems": []}
    root = Path(args.runs_dir)
    for name in (args.problems.split(",") if args.problems else suite_names()):
        row = bench_problem(name, args.overrides, root)
        out["problems"].append(row)
        print(f"[search] {json.dumps(row, default=str)}", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))


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


def table(paths: list[str]) -> str:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    rows = [r for run_ in runs for r in run_["problems"]]
    env = runs[0]["environment"]
    lines = [f"# Search benchmark on {env['gpu']}", "",
             f"torch {env['torch']}, triton {env['triton']}, {env['date']}. Offline operators, policy `triton`, "
             f"budget: `{' '.join(runs[0]['budget'])}`.", "",
             "| problem | best (us) | seed as written (us) | seed tuned (us) | vs seed | vs tuned seed | vs eager "
             "| vs compile | SoL fraction | evaluations | evals/hour | GPU busy | wall (s) | stopped |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        sol = "–" if r["sol_fraction"] is None else f"{r['sol_fraction']:.1%}"
        lines.append(f"| {r['problem']} | {_us(r['best_s'])} | {_us(r.get('seed_s'))} | {_us(r.get('tuned_seed_s'))} "
                     f"| {_x(_ratio(r, 'seed_s'))} | {_x(_ratio(r, 'tuned_seed_s'))} | {_x(r['speedup_vs_eager'])} | "
                     f"{_x(r['speedup_vs_compile'])} | {sol} | {r['evaluations']} | {r['evals_per_hour']:.0f} | "
                     f"{_pct(r['gpu_busy'])} | {r['wall_s']:.0f} | {r['stop_reason']} |")

    def geo(key_fn):
        values = [v for v in map(key_fn, rows) if v]
        return statistics.geometric_mean(values) if values else None

    beats = [r for r in rows if (_ratio(r, "seed_s") or 0) > 1.0]
    lines += ["", f"Geometric means: {_x(geo(lambda r: _ratio(r, 'seed_s')))} vs seed as written, "
              f"{_x(geo(lambda r: _ratio(r, 'tuned_seed_s')))} vs tuned seed, "
              f"{_x(geo(lambda r: r['speedup_vs_eager']))} vs eager, {_x(geo(lambda r: r['speedup_vs_compile']))} vs "
              f"torch.compile; faster than its seed as written on {len(beats)} of {len(rows)} problems; mean GPU busy "
              f"{_pct(_mean([r['gpu_busy'] for r in rows]))}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--problems", default="", help="comma-separated; empty = every suite problem")
    r.add_argument("--runs-dir", default=f"/tmp/kernelevo-bench-{int(time.time())}")
    r.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. workers_per_gpu=4")
    t = sub.add_parser("table")
    t.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if args.cmd == "run":
        run(args)
    else:
        print(table(args.paths), end="")


if __name__ == "__main__":
    main()
