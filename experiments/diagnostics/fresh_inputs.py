"""GPU measurement of fresh timing inputs (issue 25, point 2): what a fresh draw per timed call costs, and the
input-content cache it defeats.

Per problem (its bundled seed kernel at full size, in this process on the GPU) the judge's timer
(``fitness.measure.timing.CudaEventTimer`` at the default settings) times, fed by either
  rotation: three fixed input sets in turn (what every timed call saw before; the baselines' feed now),
  fresh:    ``fitness.judge.timed_inputs.FreshInputs`` (a draw of get_inputs() per call, ``checked_calls`` checked),
  * seed:  the seed kernel itself,
  * cache: the seed behind a content cache (the class of tests/candidates/content_cache.py: outputs keyed by the
           pointer and 8 strided elements of every input, the last 8 kept, a repeat answered by a copy).
Each row: median, the timing's wall time, calls, the draws' and the checks' seconds. Expected: the seed's median is
the same under both feeds (draws are outside the timed region; their cost is the wall time's growth); the cache's
median under rotation is a copy's (the cheat), under fresh the seed's plus a fingerprint (its true cost).

`--device cpu` is a dry run on Triton's interpreter at the problems' test sizes (no figure means anything there).
`--evaluate` also judges tests/candidates/content_cache.py and good.py through the evaluator on the scale-shift test
problem at [8192, 8192] (status, time, the draws' and checks' seconds from phases_s).

    python3 experiments/diagnostics/fresh_inputs.py --out experiments/results/fresh_inputs_h100/fresh_inputs_h100.json
    [--problems a,b]
                                        [--runs 3] [--evaluate] >
                                        experiments/results/fresh_inputs_h100/fresh_inputs_h100.md
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
if "--device" in sys.argv and sys.argv[sys.argv.index("--device") + 1:][:1] == ["cpu"]:
    import os
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402

from fitness.judge.candidate import build_model, copy_parameters  # noqa: E402
from fitness.judge.inputs import make_inputs, synchronize  # noqa: E402
from fitness.comparison.policy import load_policy  # noqa: E402
from fitness.problems.problem import call_get_init_inputs, load_problem, resolve_problem  # noqa: E402
from fitness.judge.timed_inputs import FreshInputs  # noqa: E402
from fitness.settings import TimingSettings  # noqa: E402
from fitness.measure.timing import CudaEventTimer, Rotation, WallClockTimer  # noqa: E402
from hardware_profiles import detect_profile  # noqa: E402

PROBLEMS = ("elementwise_chain", "layernorm", "sum_reduction", "matmul", "small_attention")


class ContentCache(torch.nn.Module):
    """A model's outputs remembered by a fingerprint of its inputs; a repeat is answered by a copy."""

    def __init__(self, model, keep: int = 8):
        super().__init__()
        self.model, self.keep, self.cache, self.hits = model, keep, {}, 0

    def forward(self, *args):
        key = tuple((a.data_ptr(), tuple(a.reshape(-1)[::max(1, a.numel() // 8)][:8].tolist()))
                    for a in args if isinstance(a, torch.Tensor))
        if key in self.cache:
            self.hits += 1
            return self.cache[key].clone()
        out = self.model(*args)
        self.cache[key] = out.clone()
        if len(self.cache) > self.keep:
            self.cache.pop(next(iter(self.cache)))
        return out


def load_models(name: str, device: str):
    import importlib.util

    spec = resolve_problem(name, size_preset="full" if device == "cuda" else "test")
    problem = load_problem(spec)
    loader = importlib.util.spec_from_file_location("seed_under_test", spec.seed_path)
    seed = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(seed)
    init = call_get_init_inputs(problem)
    reference = build_model(problem.Model, init, 0, device)
    model = build_model(seed.ModelNew, init, 0, device)
    copy_parameters(reference, model)
    return problem, reference, model


def one_timing(problem, reference, model, feed_name: str, run: int, device: str) -> dict:
    if device == "cuda":
        s = TimingSettings()
        timer = CudaEventTimer(detect_profile().l2_cache_bytes, warmup_ms=s.warmup_ms, rep_ms=s.rep_ms,
                               min_reps=s.min_reps, max_reps=s.max_reps, flush_l2=s.flush_l2)
    else:
        timer = WallClockTimer(reps=5, warmup_calls=3)
    if feed_name == "rotation":
        feed = Rotation([make_inputs(problem, 1000 + j, device) for j in range(3)])
    else:
        feed = FreshInputs(problem, device, 12345 + run, reference, load_policy("triton"),
                           checked=TimingSettings().checked_calls)
    synchronize(device)
    start = time.perf_counter()
    stats = timer.measure(model, feed)
    wall = time.perf_counter() - start
    row = {"median_us": stats.median_s * 1e6, "n": stats.n, "wall_ms": wall * 1e3}
    if isinstance(feed, FreshInputs):
        row.update(calls=feed.calls, draw_ms=feed.draw_s * 1e3, check_ms=feed.check_s * 1e3,
                   draw_us_per_call=feed.draw_s / feed.calls * 1e6, checked=feed.summary()["timed_outputs_checked"])
    return row


def measure_problem(name: str, runs: int, device: str) -> list[dict]:
    problem, reference, seed = load_models(name, device)
    rows = []
    with torch.no_grad():
        torch.set_float32_matmul_precision("highest")  # the reference that checks is full fp32, as in the judge
        for kind in ("seed", "cache"):
            for feed_name in ("rotation", "fresh"):
                for run in range(runs):
                    model = ContentCache(seed) if kind == "cache" else seed
                    row = one_timing(problem, reference, model, feed_name, run, device)
                    row.update(problem=name, model=kind, feed=feed_name, run=run,
                               hits=getattr(model, "hits", None))
                    rows.append(row)
                    print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def evaluate_attack() -> list[dict]:
    from fitness.evaluation.evaluator import EvalSettings, Evaluator

    problem = resolve_problem(str(REPO / "tests" / "problems" / "scale_shift.py"),
                              sizes={"batch_size": 8192, "dim": 8192})
    rows = []
    with Evaluator(problem, load_policy("triton"), detect_profile(), EvalSettings(), device="cuda") as ev:
        for name in ("good", "content_cache", "good", "content_cache"):
            result = ev.evaluate((REPO / "tests" / "candidates" / f"{name}.py").read_text())
            rows.append({"candidate": name, "status": result.status, "reason": result.reason[:200],
                         "time_us": (result.time_s or 0) * 1e6, "timing_s": result.phases_s.get("timing"),
                         "timed_inputs_s": result.phases_s.get("timed_inputs"),
                         "verify_timed_s": result.phases_s.get("verify_timed"), "guards": {
                             k: result.guards.get(k) for k in ("timed_calls", "timed_outputs_checked")}})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def markdown(data: dict) -> str:
    lines = [f"# Fresh timing inputs: cost and the content cache ({data['gpu']})", "",
             f"Command: `{data['command']}`", "",
             "| problem | model | feed | median us | n | timing wall ms | calls | draws ms (us/call) | checks ms | "
             "cache hits |", "|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict = {}
    for row in data["rows"]:
        groups.setdefault((row["problem"], row["model"], row["feed"]), []).append(row)
    for (problem, model, feed), rows in groups.items():
        def med(key: str, fmt: str = ".1f") -> str:
            return format(statistics.median(r[key] for r in rows), fmt) if feed == "fresh" or key in (
                "median_us", "n", "wall_ms") else "-"
        draws = f"{med('draw_ms')} ({med('draw_us_per_call')})" if feed == "fresh" else "-"
        hits = "-" if rows[0]["hits"] is None else max(r["hits"] for r in rows)
        lines.append(f"| {problem} | {model} | {feed} | {med('median_us')} | {med('n', '.0f')} | {med('wall_ms')} | "
                     f"{med('calls', '.0f')} | {draws} | {med('check_ms')} | {hits} |")
    if data.get("evaluate"):
        lines += ["", "| candidate (scale-shift 8192x8192) | status | time us | timing s | draws s | checks s | "
                  "timed calls | checked |", "|---|---|---|---|---|---|---|---|"]
        for r in data["evaluate"]:
            lines.append(f"| {r['candidate']} | {r['status']} | {r['time_us']:.1f} | {r['timing_s'] or 0:.3f} | "
                         f"{r['timed_inputs_s'] or 0:.3f} | {r['verify_timed_s'] or 0:.3f} | "
                         f"{r['guards']['timed_calls']} | {r['guards']['timed_outputs_checked']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--evaluate", action="store_true")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = [row for name in args.problems.split(",") for row in measure_problem(name, args.runs, args.device)]
    data = {"gpu": torch.cuda.get_device_name() if args.device == "cuda" else "CPU interpreter (dry run)", "host": platform.node(), "torch": torch.__version__,
            "command": "python3 experiments/diagnostics/fresh_inputs.py " + " ".join(sys.argv[1:]), "rows": rows,
            "evaluate": evaluate_attack() if args.evaluate and args.device == "cuda" else []}
    Path(args.out).write_text(json.dumps(data, indent=1))
    print(markdown(data))


if __name__ == "__main__":
    main()
