"""The cost of the judge's trials added for issue 63 (the probe, parameter and differential trials), on the CPU
interpreter.

    TRITON_INTERPRET=1 python experiments/new_trials_cost.py OUT_DIR [--repeats 3] [--problems matmul layernorm ...]

Evaluates each bundled problem's seed at its test sizes (the full evaluation, interpreter timing included)
`--repeats` times, plus
tests/problems/below_threshold.py (KernelBench level2/9 in small, the only one here with a probe trial) with
tests/candidates/linear_relu_tf32.py, and writes OUT_DIR/new_trials_cost.md and .json: per problem the median share
of the evaluation's wall time (``eval_wall_s``) spent in each new trial's phase (``probes``, ``parameters``,
``differential``; the coverage trial's beside them), then
the median over the problems where the trial ran. Interpreter seconds: a share here says nothing of a GPU's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelevo.core.stats import median  # noqa: E402

PHASES = ("probes", "parameters", "differential", "coverage")  # the coverage trial (not new) for comparison
OWN = ("below_threshold", ROOT / "tests" / "problems" / "below_threshold.py",
       ROOT / "tests" / "candidates" / "linear_relu_tf32.py")


def judge(problem, source: str, repeats: int, device: str = "cpu", size_preset: str = "test") -> dict:
    """`source` judged `repeats` times on `problem` (policy triton): the median share of each trial's phase."""
    from fitness.comparison.policy import load_policy
    from fitness.evaluation.evaluator import Evaluator
    from fitness.problems.problem import resolve_problem
    from fitness.settings import EvalSettings
    from hardware_profiles import load_profile, resolve_profile

    spec = resolve_problem(str(problem), size_preset=size_preset)
    profile = load_profile("cpu_interpreter") if device == "cpu" else resolve_profile("auto")
    settings = EvalSettings() if device == "cpu" else EvalSettings(baselines=["eager"])
    rows = []
    with Evaluator(spec, load_policy("triton"), profile, settings, device=device) as ev:
        for _ in range(repeats):
            result = ev.evaluate(source)
            rows.append({"status": result.status, "wall_s": result.eval_wall_s,
                         **{p: result.phases_s.get(p) for p in PHASES},
                         "parameters_record": result.guards.get("parameters"), "reason": result.reason[:200]})
    ok = [r for r in rows if r["status"] == "ok" and r["wall_s"]]
    for r in ok:  # a parameter trial not run (no parameters) leaves a phase of microseconds: not its cost
        r["parameters"] = r["parameters"] if "changed" in (r["parameters_record"] or {}) else None
    return {"evaluations": len(rows), "ok": len(ok), "median_wall_s": median(r["wall_s"] for r in ok),
            **{f"{p}_share": median(r[p] / r["wall_s"] for r in ok if r[p] is not None) for p in PHASES},
            "parameters_record": rows[-1]["parameters_record"],
            "not_ok": [f"{r['status']}: {r['reason']}" for r in rows if r not in ok]}


def write_table(table: dict, out: Path, stem: str, title: str) -> dict:
    """OUT/<stem>.json and .md: each problem's shares, then the median over the problems where each trial ran."""
    overall = {p: median(row[f"{p}_share"] for row in table.values() if row[f"{p}_share"] is not None)
               for p in PHASES}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"title": title, "problems": table, "median": overall}, indent=1))
    lines = [f"# The trials' median share of an evaluation: {title}", "",
             "| problem | ok / judged | median eval wall s | probe trial | parameter trial | differential trial "
             "| coverage trial (before) | parameter trial's record |", "|---|---|---|---|---|---|---|---|"]
    for name, row in table.items():
        share = {p: "-" if row[f"{p}_share"] is None else f"{100 * row[f'{p}_share']:.1f} %" for p in PHASES}
        lines.append(f"| {name} | {row['ok']} / {row['evaluations']} | {row['median_wall_s'] or 0:.2f} | "
                     f"{share['probes']} | {share['parameters']} | {share['differential']} | {share['coverage']} | "
                     f"{json.dumps(row['parameters_record'])} |")
    failed = [f"- {name}: {reason}" for name, row in table.items() for reason in row.get("not_ok", [])]
    lines += ["", "Median over the problems where each ran: " + ", ".join(
        f"{p} {'-' if v is None else f'{100 * v:.1f} %'}" for p, v in overall.items())]
    lines += ["", "Evaluations not ok (not counted):", *failed] if failed else []
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return overall


def main() -> None:
    from fitness.problems.problem import resolve_problem, suite_names

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--problems", nargs="*", default=None, help="bundled problems (default: all)")
    args = parser.parse_args()
    table = {}
    for name in args.problems or suite_names():
        table[name] = judge(name, resolve_problem(name).seed_source(), args.repeats)
        print(name, table[name], flush=True)
    table[OWN[0]] = judge(OWN[1], OWN[2].read_text(), args.repeats)
    print(OWN[0], table[OWN[0]], flush=True)
    write_table(table, args.out, "new_trials_cost", "every bundled problem's seed on the CPU interpreter")
    print((args.out / "new_trials_cost.md").read_text())


if __name__ == "__main__":
    main()
