"""The three baselines (eager, torch.compile, torch.compile max-autotune-no-cudagraphs) of a KernelBench selection at
full sizes, without any search (issue 25: the baselines users actually have): each problem's baselines measured by
the evaluator exactly as a run measures them (``fitness.baselines``: trusted workers, the fastest of two processes,
TF32 as the policy says), with each one's status and how much faster max-autotune is than the default.

    python3 experiments/baseline_table.py --root KB --list dev-20.txt --out experiments/results/baselines_dev20_h100
    python3 experiments/baseline_table.py ... --keep experiments/results/baselines_dev20_h100/baselines_dev20_h100.json 
    # go on

Rows of --keep may name their `source` (e.g. a bench's rows, which measure the same baselines the same way); the
table says which script measured each row.

writes OUT.json (rows and the manifest) and OUT.md (the table and the command). Extra arguments after `--` are
fitness settings (`baseline_compile_timeout_s=600`).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kernelevo.core.stats import geometric_mean  # noqa: E402
from fitness.common.formatting import microseconds, ratio  # noqa: E402


def measure(path: str, policy: str, settings: dict, cache: Path) -> dict:
    from fitness.evaluation.evaluator import EvalSettings, Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import resolve_profile

    started = time.time()
    spec = resolve_problem(path, size_preset="full")
    with Evaluator(spec, load_policy(policy), resolve_profile("auto"), EvalSettings(**settings), device="cuda",
                   cache_dir=cache) as ev:
        baseline = ev.baseline()
        sizes = ev.sizes_text()
    times = {name: (s.median_s if (s := baseline.stats(name)) is not None else None)
             for name in ("eager", "compile", "max_autotune")}
    best = baseline.best()
    return {"problem": path, "sizes": sizes, **{f"{k}_s": v for k, v in times.items()}, "status": baseline.status,
            "best": best[0] if best else None, "notes": baseline.notes, "wall_s": time.time() - started}


def table(rows: list[dict], command: str, manifest: dict) -> str:
    from evo.records.manifest import manifest_rows
    from fitness.measure.baselines import speedup_text

    lines = ["# Baselines at full sizes: eager, torch.compile, torch.compile max-autotune", "", "    " + command, "",
             "| problem | eager (us) | compile (us) | max-autotune (us) | compile / max-autotune | eager / best | "
             "best | max-autotune status | wall (s) | measured by |", "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for r in rows:
        c, m, e = r["compile_s"], r["max_autotune_s"], r["eager_s"]
        best = min(t for t in (e, c, m) if t) if any((e, c, m)) else None
        if c and m:
            ratios.append(c / m)
        lines.append(f"| {Path(r['problem']).stem} | {microseconds(e)} | {microseconds(c)} | "
                     f"{microseconds(m) if m else speedup_text(None, r['status'].get('max_autotune'))} | "
                     f"{ratio(c, m, '-')} | {ratio(e, best, '-')} | "
                     f"{r['best'] or '-'} | {r['status'].get('max_autotune', '-')} | {r['wall_s']:.0f} | "
                     f"{r.get('source', 'this script')} |")
    if ratios:
        geo = geometric_mean(ratios)
        lines += ["", f"max-autotune vs default torch.compile: geometric mean {geo:.3f}x over {len(ratios)} problems "
                      f"(above 1: max-autotune faster)"]
    lines += ["", "## Manifest", "", *[f"- {k}: {v}" for k, v in manifest_rows(manifest)]]
    return "\n".join(lines) + "\n"


def setting(text: str) -> tuple:
    """KEY=VALUE, the value read as JSON where it is (numbers, true, null), else as text."""
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="KernelBench's KernelBench/ folder")
    parser.add_argument("--list", required=True, help="problems, one path under --root per line")
    parser.add_argument("--policy", default="triton")
    parser.add_argument("--out", required=True, help="OUT: writes OUT.json and OUT.md")
    parser.add_argument("--keep", help="an earlier OUT.json: its problems are not measured again")
    parser.add_argument("settings", nargs="*", help="fitness settings KEY=VALUE (after --)")
    args = parser.parse_args()
    settings = dict(setting(s) for s in args.settings)
    problems = [str(Path(args.root) / line.strip()) for line in Path(args.list).read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    rows = json.loads(Path(args.keep).read_text())["rows"] if args.keep else []
    done = {r["problem"] for r in rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python3 experiments/baseline_table.py " + " ".join(sys.argv[1:])
    from evo.records.manifest import build_manifest

    with tempfile.TemporaryDirectory() as cache:
        for path in (p for p in problems if p not in done):
            try:
                rows.append(measure(path, args.policy, settings, Path(cache)))
            except Exception as exc:  # noqa: BLE001 - a problem that cannot be loaded is a row with its reason
                rows.append({"problem": path, "eager_s": None, "compile_s": None, "max_autotune_s": None,
                             "status": {}, "best": None, "notes": [f"{type(exc).__name__}: {exc}"[:300]],
                             "wall_s": 0.0})
            print(f"[baselines] {rows[-1]}", flush=True)
            statuses = {name: dict(Counter(r["status"][name] for r in rows if name in r["status"]))
                        for name in ("eager", "compile", "max_autotune")}
            manifest = build_manifest("cuda", args.policy, {"search": [], "fitness": settings.get("seed", 0)},
                                      statuses)
            out.with_suffix(".json").write_text(json.dumps({"command": command, "manifest": manifest,
                                                            "rows": rows}, indent=1) + "\n")
            out.with_suffix(".md").write_text(table(rows, command, manifest))


if __name__ == "__main__":
    main()
