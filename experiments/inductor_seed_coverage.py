"""How many KernelBench problems get an Inductor seed, and does it pass the evaluator (issue: compiler seeds).
On the CPU (Triton's interpreter) the problems are shrunk: every integer size constant above --cap becomes --cap.

    python3 experiments/inductor_seed_coverage.py --root ../shared/kernelbench \
        --list ../shared/kernelbench/dev-20.txt --cap 16 --out OUT.json
    python3 experiments/inductor_seed_coverage.py --device cuda --root KB --list LIST --cache DIR --capture-only \
        --jobs 3 --out OUT.json        # GPU: capture and convert only (3 at once), captures kept in DIR
    python3 experiments/inductor_seed_coverage.py --device cuda --root KB --list LIST --cache DIR --out OUT.json
    python3 experiments/inductor_seed_coverage.py ... --keep EARLIER.json --out OUT.json   # go on where it stopped
    python3 experiments/inductor_seed_coverage.py --table OUT.json

Seeds are made for `--policy` (default `triton`: matmuls as Inductor's Triton GEMM templates on a GPU, and a seed
that would need a library call is a failure with its reason); under `kernelbench` Inductor's library calls stay
(labelled uses-torch-compute). The evaluator row has the seed's time and torch.compile's, measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from fitness.common.formatting import microseconds, speedup  # noqa: E402


def shrunk_spec(path: str, cap: int):
    from fitness.problems.problem import load_problem, resolve_problem

    module = load_problem(resolve_problem(path)).module
    sizes = {k: cap for k, v in vars(module).items()
             if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool) and v > cap}
    return resolve_problem(path, sizes=sizes)


def one(path: str, cap: int, cache: Path, device: str, policy: str, capture_only: bool) -> dict:
    from fitness.evaluation.evaluator import EvalSettings, Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.judge.static_check import check_source
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import load_profile, resolve_profile
    from kernelevo.seeds.inductor import inductor_seed, library_calls, policy_options
    from kernelevo.seeds.inductor.convert import SeedError

    try:
        spec = shrunk_spec(path, cap) if device == "cpu" else resolve_problem(path)
    except Exception as exc:  # noqa: BLE001 - a problem that does not load (a missing module) is a row, not a crash
        return {"problem": path, "sizes": {}, "seed": "none", "why": f"the problem did not load: {exc}"[:300]}
    row, started = {"problem": path, "sizes": spec.sizes}, time.time()
    profile = load_profile("cpu_interpreter") if device == "cpu" else resolve_profile("auto")
    try:
        source = inductor_seed(spec, device, profile.name, cache, **policy_options(load_policy(policy)))
    except SeedError as exc:
        return {**row, "seed": "none", "why": str(exc).splitlines()[0][:300], "convert_s": time.time() - started}
    except Exception as exc:  # noqa: BLE001 - a converter bug is a row with its reason; the others go on
        return {**row, "seed": "none", "why": f"converter failed: {type(exc).__name__}: {exc}"[:300],
                "convert_s": time.time() - started}
    row.update(seed="converted", library=library_calls(source), convert_s=time.time() - started, policy=policy)
    refused = [str(finding) for finding in check_source(source)]  # what the judge would refuse before running it
    if refused:
        return {**row, "seed": "refused", "why": "static check: " + "; ".join(refused)[:280]}
    if capture_only:
        return row
    with Evaluator(spec, load_policy(policy), profile, EvalSettings(trials=3), device=device) as evaluator:
        result = evaluator.evaluate(source, label="inductor")
    return {**row, "status": result.status, "reason": (result.reason or "")[:300], "time_s": result.time_s,
            "compile_s": result.compile_s, "eager_s": result.eager_s, "vs_compile": result.speedup_vs_compile,
            "eval_wall_s": result.eval_wall_s}


def table(rows: list[dict]) -> str:
    lines = ["| problem | seed | library calls | policy | evaluator | seed (us) | compile (us) | seed vs compile | "
             "reason |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {Path(r['problem']).parent.name}/{Path(r['problem']).name} | {r['seed']} | "
                     f"{', '.join(r.get('library', [])) or '-'} | {r.get('policy', '-')} | {r.get('status', '-')} | "
                     f"{microseconds(r.get('time_s'))} | {microseconds(r.get('compile_s'))} | "
                     f"{speedup(r.get('vs_compile'))} | "
                     f"{(r.get('why') or r.get('reason') or '').replace('|', '/')[:160]} |")
    converted = [r for r in rows if r["seed"] == "converted"]
    passed = [r for r in converted if r.get("status") == "ok"]
    near = [r for r in passed if r.get("vs_compile") and r["vs_compile"] >= 1 / 1.05]
    lines += ["", f"{len(converted)} of {len(rows)} converted; {len(passed)} of those passed the evaluator"
              + (f"; {len(near)} of those within 5 % of torch.compile's time (or faster)." if any(
                  r.get("vs_compile") for r in passed) else ".")]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="")
    parser.add_argument("--list", default="")
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--policy", default="triton", choices=["triton", "kernelbench"])
    parser.add_argument("--cache", default="", help="where captures are cached (kept between runs)")
    parser.add_argument("--capture-only", action="store_true", help="capture and convert, do not evaluate")
    parser.add_argument("--jobs", type=int, default=1, help="problems at once")
    parser.add_argument("--out", default="")
    parser.add_argument("--keep", default="", help="rows of an earlier --out to keep (those problems are not redone)")
    parser.add_argument("--table", default="")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    cache = Path(args.cache or tempfile.mkdtemp(prefix="kernelevo-coverage-"))
    paths = [str(Path(args.root) / rel) for rel in Path(args.list).read_text().split()]
    kept = json.loads(Path(args.keep).read_text()) if args.keep else []
    rows = [r for r in kept if r["problem"] in paths and (args.capture_only or "status" in r)]
    todo = [p for p in paths if p not in {r["problem"] for r in rows}]

    def done(row: dict) -> None:
        rows.append(row)
        print(json.dumps(row, default=str)[:500], flush=True)
        Path(args.out).write_text(json.dumps(sorted(rows, key=lambda r: paths.index(r["problem"])), indent=1,
                                             default=str))

    # several evaluations at once share the GPU for their checks; their timings never overlap (the machine-wide
    # GPU lock), but GPU memory must hold them all
    with ThreadPoolExecutor(args.jobs) as pool:  # rows written as each finishes: a call cut short keeps them
        futures = [pool.submit(one, p, args.cap, cache, args.device, args.policy, args.capture_only) for p in todo]
        for future in as_completed(futures):
            done(future.result())
    print(table(sorted(rows, key=lambda r: paths.index(r["problem"]))), end="")


if __name__ == "__main__":
    main()
