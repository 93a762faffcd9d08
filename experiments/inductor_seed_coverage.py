"""How many KernelBench problems get an Inductor seed, and does it pass the evaluator (issue: compiler seeds).
On the CPU (Triton's interpreter) the problems are shrunk: every integer size constant above --cap becomes --cap.

    python3 experiments/inductor_seed_coverage.py --root ../shared/kernelbench \
        --list ../shared/kernelbench/dev-20.txt --cap 16 --out OUT.json
    python3 experiments/inductor_seed_coverage.py --table OUT.json

A converted seed with library calls (Inductor keeps cuBLAS / cuDNN for matmuls and convolutions) is evaluated
under policy `kernelbench` (labelled uses-torch-compute); the others under `triton`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def shrunk_spec(path: str, cap: int):
    from fitness.problem import load_problem, resolve_problem

    module = load_problem(resolve_problem(path)).module
    sizes = {k: cap for k, v in vars(module).items()
             if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool) and v > cap}
    return resolve_problem(path, sizes=sizes)


def one(path: str, cap: int, cache: Path, device: str) -> dict:
    from fitness.evaluator import EvalSettings, Evaluator
    from fitness.policy import load_policy
    from fitness.problem import resolve_problem
    from hardware_profiles import load_profile, resolve_profile
    from operators.inductor_seed import inductor_seed, library_calls
    from operators.inductor_seed.convert import SeedError

    spec = shrunk_spec(path, cap) if device == "cpu" else resolve_problem(path)
    row, started = {"problem": path, "sizes": spec.sizes}, time.time()
    profile = load_profile("cpu_interpreter") if device == "cpu" else resolve_profile("auto")
    try:
        source = inductor_seed(spec, device, profile.name, cache, torch_compute_allowed=True)
    except SeedError as exc:
        return {**row, "seed": "none", "why": str(exc).splitlines()[0][:200], "convert_s": time.time() - started}
    row.update(seed="converted", library=library_calls(source), convert_s=time.time() - started)
    policy = "kernelbench" if row["library"] else "triton"
    with Evaluator(spec, load_policy(policy), profile, EvalSettings(trials=3), device=device) as evaluator:
        result = evaluator.evaluate(source, label="inductor")
    return {**row, "policy": policy, "status": result.status, "reason": (result.reason or "")[:200],
            "time_s": result.time_s}


def table(rows: list[dict]) -> str:
    lines = ["| problem | seed | library calls | policy | evaluator | reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {Path(r['problem']).parent.name}/{Path(r['problem']).name} | {r['seed']} | "
                     f"{', '.join(r.get('library', [])) or '-'} | {r.get('policy', '-')} | {r.get('status', '-')} | "
                     f"{(r.get('why') or r.get('reason') or '').replace('|', '/')[:120]} |")
    converted = [r for r in rows if r["seed"] == "converted"]
    passed = [r for r in converted if r.get("status") == "ok"]
    lines += ["", f"{len(converted)} of {len(rows)} converted; {len(passed)} of those passed the evaluator."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default="")
    parser.add_argument("--list", default="")
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default="")
    parser.add_argument("--table", default="")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(Path(args.table).read_text())), end="")
        return
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    cache, rows = Path(tempfile.mkdtemp(prefix="kernelevo-coverage-")), []
    for rel in Path(args.list).read_text().split():
        rows.append(one(str(Path(args.root) / rel), args.cap, cache, args.device))
        print(json.dumps(rows[-1], default=str)[:400], flush=True)
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str))
    print(table(rows), end="")


if __name__ == "__main__":
    main()
