"""The coverage trial's cost and verdicts over a bench's run stores (issue 41), read-only.

    python experiments/coverage_cost.py BENCH_DIR [--out results.md] [--rejudge --kernelbench ROOT]

For every run store under BENCH_DIR (`runs/<problem>/run.db`, and a multirun's `*/run.db`), over its stored
evaluations with a verdict: how many ran the coverage trial (the worker's phase ``coverage`` in ``phases_s``), the
median of coverage / eval_wall_s (the evaluation's own wall time, the one-off baselines excluded) over its ok
evaluations, the median coverage seconds, and how many evaluations the coverage trial rejected (reason starting
"coverage trial:"). Then the median share over the problems: the issue's bound is 10 %. ``--rejudge`` also judges
each run's best_kernel.py again with the current judge at full size on this machine's GPU (eager baseline only):
its verdict and its coverage share, so best kernels found before the coverage trial existed can be checked
("every dev-20 best kernel still passes").
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelevo.core.stats import median  # noqa: E402


def store_rows(db: Path) -> list[dict]:
    """Every stored verdict of the run store `db` lives in, as records (read through the store: no SQL here)."""
    from evo.records.store import RunStore

    store = RunStore(db.parent, create=False)
    try:
        return [result.to_dict() for result in store.evaluations().values()]
    finally:
        store.close()


def problem_of(db: Path) -> tuple[str, dict]:
    from evo.records.store import RunStore

    store = RunStore(db.parent, create=False)
    try:
        config = store.get_meta("config") or {}
    finally:
        store.close()
    return (config.get("problem") or {}).get("name", db.parent.name), config


def summarise(db: Path) -> dict:
    results = store_rows(db)
    covered = [r for r in results if "coverage" in (r.get("phases_s") or {})]
    ok = [r for r in covered if r["status"] == "ok" and r.get("eval_wall_s")]
    shares = [r["phases_s"]["coverage"] / r["eval_wall_s"] for r in ok]
    return {"run": str(db.parent), "problem": problem_of(db)[0], "evaluations": len(results),
            "with_coverage": len(covered), "ok": len(ok),
            "median_share": median(shares),
            "median_coverage_s": median(r["phases_s"]["coverage"] for r in ok),
            "median_eval_wall_s": median(r["eval_wall_s"] for r in ok),
            "rejected_by_coverage": sum(1 for r in results if str(r.get("reason", "")).startswith("coverage trial:"))}


def rejudge(db: Path, kernelbench: Path | None) -> dict:
    """The run's best kernel judged again by the current judge at full size (eager baseline only)."""
    from fitness.evaluation.evaluator import Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from fitness.settings import EvalSettings
    from hardware_profiles import resolve_profile

    best = db.parent / "best_kernel.py"
    if not best.is_file():
        return {"rejudged": "no best_kernel.py"}
    name, config = problem_of(db)
    if kernelbench is not None and not Path(name).is_file():  # a path of the machine the bench ran on
        found = list(kernelbench.glob(f"level*/{Path(name).name}"))
        name = str(found[0]) if found else name
    policy = load_policy(((config.get("fitness") or {}).get("policy") or {}).get("name", "triton"))
    with Evaluator(resolve_problem(name), policy, resolve_profile("auto"), EvalSettings(baselines=["eager"])) as ev:
        result = ev.evaluate(best.read_text())
    coverage = (result.phases_s or {}).get("coverage")
    return {"rejudged": result.status, "rejudged_reason": result.reason[:300], "rejudged_coverage_s": coverage,
            "rejudged_share": coverage / result.eval_wall_s if coverage and result.eval_wall_s else None}


def percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def seconds(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def markdown(rows: list[dict], command: str) -> str:
    shares = [r["median_share"] for r in rows if r["median_share"] is not None]
    lines = ["# The coverage trial's cost over a bench's run stores", "", f"Command: `{command}`", "",
             "| problem | evaluations | with coverage trial | ok | median coverage (s) | median evaluation (s) | "
             "median share | rejected by coverage | best re-judged | its share |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {Path(r['problem']).stem} | {r['evaluations']} | {r['with_coverage']} | {r['ok']} | "
                     f"{seconds(r['median_coverage_s'])} | {seconds(r['median_eval_wall_s'])} | "
                     f"{percent(r['median_share'])} | {r['rejected_by_coverage']} | {r.get('rejudged', '-')} | "
                     f"{percent(r.get('rejudged_share'))} |")
    lines += ["", f"Median over problems of the median coverage share: "
                  f"{percent(median(shares))} (bound: 10 %)."]
    if any("rejudged" in r for r in rows):
        passed = sum(1 for r in rows if r.get("rejudged") == "ok")
        lines.append(f"Best kernels passing the current judge: {passed} of {len(rows)}.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", type=Path)
    parser.add_argument("--out", type=Path, help="write the markdown table here (and the JSON beside it)")
    parser.add_argument("--rejudge", action="store_true", help="judge each run's best kernel again (needs a GPU)")
    parser.add_argument("--kernelbench", type=Path, help="KernelBench's root, where the runs' problem paths moved")
    args = parser.parse_args()
    rows = []
    for db in sorted(args.bench.rglob("run.db")):
        row = summarise(db)
        if args.rejudge:
            row.update(rejudge(db, args.kernelbench))
        rows.append(row)
    text = markdown(rows, "python " + " ".join(sys.argv))
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
