"""Run the ablation presets as one Hydra multirun of `kernelevo run`, then tabulate them.

Presets live in experiments/ablations/ablation/*.yaml (each a `# @package _global_` delta on the run config):
full, no_planner, no_debugger, no_hardware_profile, no_profiling_feedback, no_profiler_feedback, no_crossover,
random_selection, offline_only. Every LLM preset needs an LLM (`--llm local`, `--llm openai`, ...).

    python3 experiments/ablations/run_ablations.py --llm openai --problem row_softmax -- search.generations=10
    python3 experiments/ablations/run_ablations.py --presets offline_only,random_selection --operators offline \\
        --problem rmsnorm -- search=tiny          # offline, as CI runs it

Extra Hydra overrides go after `--`; they beat the presets (so `--operators offline` runs every preset with the
offline operators). The table (markdown) is printed and written to <multirun dir>/ablations.md.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))
PRESETS = sorted(p.stem for p in (HERE / "ablation").glob("*.yaml"))


def multirun_command(args, sweep_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "kernelevo.cli", "run", "--multirun", f"hydra.searchpath=[file://{HERE}]",
           f"+ablation={','.join(args.presets)}", f"problem={args.problem}", f"hydra.sweep.dir={sweep_dir}",
           "hydra.sweep.subdir=${hydra.job.num}-${experiment.name}"]
    if args.llm:
        cmd.append(f"llm={args.llm}")
    if args.operators:
        cmd.append(f"operators={args.operators}")
    return cmd + args.overrides


def run_row(run_dir: Path) -> dict:
    """One preset's outcome, read from its run store."""
    from evo.records.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        config = store.get_meta("config", {})
        individuals = store.individuals()
        statuses = [result.status for result in store.evaluations().values()]
        llm = store.llm_totals()
        stop = store.get_meta("stop_reason", "")
    finally:
        store.close()
    correct = [ind.time_s for ind in individuals if ind.ok]
    root = next((ind for ind in individuals if not ind.parents), None)
    return {"preset": config.get("experiment", {}).get("name", run_dir.name), "best_s": min(correct, default=None),
            "root_s": root.time_s if root is not None and root.ok else None, "evaluations": len(statuses),
            "ok": statuses.count("ok"), "llm_calls": llm["calls"], "cost_usd": llm["cost_usd"], "stop": stop}


def table(rows: list[dict]) -> str:
    lines = ["| preset | best (ms) | vs tuned seed | evaluations (ok) | LLM calls | cost (USD) | stopped |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        best = "–" if r["best_s"] is None else f"{r['best_s'] * 1e3:.4f}"
        gain = "–" if not (r["best_s"] and r["root_s"]) else f"{r['root_s'] / r['best_s']:.2f}x"
        lines.append(f"| {r['preset']} | {best} | {gain} | {r['evaluations']} ({r['ok']}) | {r['llm_calls']} | "
                     f"{r['cost_usd']:.4f} | {r['stop']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default=",".join(PRESETS), type=lambda s: s.split(","))
    parser.add_argument("--problem", default="elementwise_chain")
    parser.add_argument("--llm", default="", help="an llm preset (operators/llm/presets/): openai, anthropic, local")
    parser.add_argument("--operators", default="", help="force one operators preset for every ablation")
    parser.add_argument("--out", default="", help="sweep directory (default: outputs/multirun/ablations-<pid>)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides (after --)")
    args = parser.parse_args()
    unknown = sorted(set(args.presets) - set(PRESETS))
    if unknown:
        parser.error(f"unknown presets {unknown}; choose from {PRESETS}")
    sweep_dir = Path(args.out or f"outputs/multirun/ablations-{os.getpid()}").resolve()
    proc = subprocess.run(multirun_command(args, sweep_dir), cwd=Path.cwd())
    rows = [run_row(d) for d in sorted(sweep_dir.iterdir()) if (d / "run.db").is_file()]
    text = table(rows)
    (sweep_dir / "ablations.md").write_text(text)
    print(text, end="")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
