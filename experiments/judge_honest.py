"""Issue 41 measured: the judge keeps exact rewrites and rejects subsampling kernels, with the real Evaluator.

    python experiments/judge_honest.py OUT_DIR [--kernelbench ROOT] [--cpu] [--loss-baselines eager,compile]

Cases (kernels in experiments/judge_kernels/):
* exact rewrites of two KernelBench level-2 problems whose reference reduces a GEMM's output (level2/14 and
  level2/18: sum_h(x W^T + b) = x colsum(W) + sum(b), no GEMM): expected ok, and plausible (above the data floor);
* the losses level1/94_MSELoss and level1/100_HingeLoss computed by an honest kernel (expected ok) and by kernels
  reading 1/2, 9/10 and 99/100 of the rows and rescaling (expected incorrect, for the coverage trial); each of those
  also judged with the coverage trial off (``fitness.coverage=false``), the judge before issue 41 less its
  plausibility bound: what the ordinary trials and the data floor say of it alone.

Writes OUT_DIR/judge_honest.json (every result record, less timing samples) and OUT_DIR/judge_honest.md: verdict,
reason, time, speed-ups over eager / torch.compile / max-autotune, the fractions of the data floor and of the
reference algorithm's roofline, and the coverage trial's time against the evaluation's. On a GPU the problems run
at KernelBench's full sizes; with --cpu on Triton's interpreter at small sizes (the GEMM problems at the shrink
rule's test sizes; the losses, whose shape is a tuple the rule cannot shrink, from a copy in a temporary directory
with 32768 replaced by 256), to check the kernels before a GPU run. Baselines: all of fitness.baselines for the
rewrites; --loss-baselines for the losses (default eager: max-autotune of a mean takes tens of seconds twice).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fitness.evaluation.evaluator import BaselineSlot, Evaluator, default_device  # noqa: E402
from fitness.comparison.policy import load_policy  # noqa: E402
from fitness.problems.problem import resolve_problem  # noqa: E402
from fitness.settings import EvalSettings  # noqa: E402
from hardware_profiles import load_profile, resolve_profile  # noqa: E402

KERNELS = ROOT / "experiments" / "judge_kernels"
REWRITES = [("level2/14_Gemm_Divide_Sum_Scaling.py", "gemm_divide_sum_scaling"),
            ("level2/18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py", "matmul_sum_max_avgpool_lse_lse")]
LOSSES = [("level1/94_MSELoss.py", "mse_subsample"), ("level1/100_HingeLoss.py", "hinge_subsample")]
SKIPS = {0: "all of the work", 2: "1/2 of the work", 10: "9/10 of the work", 100: "99/100 of the work"}
CPU_LOSS_SIZE = 256


def small_copy(path: Path, into: Path) -> Path:
    """A loss problem at CPU_LOSS_SIZE (its shape is a tuple the shrink rule cannot change), outside the repo."""
    copy = into / path.name
    copy.write_text(path.read_text().replace("32768", str(CPU_LOSS_SIZE)))
    return copy


def row_of(problem: str, kernel: str, work: str, coverage: bool, result, wall_s: float) -> dict:
    phases = result.phases_s or {}
    evaluation = result.eval_wall_s or 0.0
    return {"problem": problem, "kernel": kernel, "work": work, "coverage_trial": coverage,
            "status": result.status, "reason": result.reason[:400], "time_s": result.time_s,
            "speedup_vs_eager": result.speedup_vs_eager, "speedup_vs_compile": result.speedup_vs_compile,
            "speedup_vs_max_autotune": result.speedup_vs_max_autotune, "floor_s": result.floor_s,
            "floor_fraction": result.floor_fraction, "roofline_s": result.sol_s,
            "roofline_fraction": result.sol_fraction, "coverage_s": phases.get("coverage"),
            "trials_s": phases.get("trials"), "eval_wall_s": evaluation,
            "coverage_share": phases["coverage"] / evaluation if phases.get("coverage") and evaluation else None,
            "coverage": result.guards.get("coverage"), "wall_s": wall_s}


def judge(evaluator: Evaluator, source: str, problem: str, kernel: str, work: str, coverage: bool) -> dict:
    start = time.perf_counter()
    result = evaluator.evaluate(source)
    row = row_of(problem, kernel, work, coverage, result, time.perf_counter() - start)
    print(f"[judge_honest] {problem} {kernel} ({work}, coverage trial {'on' if coverage else 'off'}): "
          f"{result.status} {result.reason[:160]}", flush=True)
    return row


def evaluators(spec, profile, device: str, baselines: list[str], slot: BaselineSlot):
    """(with the coverage trial, without it): one baseline slot and one sandbox between them."""
    policy = load_policy("triton")
    on = Evaluator(spec, policy, profile, EvalSettings(baselines=baselines), device=device, baseline_slot=slot)
    off = Evaluator(spec, policy, profile, EvalSettings(baselines=baselines, coverage=False), device=device,
                    baseline_slot=slot, sandbox=on.sandbox)
    return on, off


def run(root: Path, cpu: bool, loss_baselines: list[str], scratch: Path) -> list[dict]:
    device = "cpu" if cpu else default_device()
    profile = load_profile("cpu_interpreter") if cpu else resolve_profile("auto")
    rows = []
    for relative, kernel in REWRITES:
        spec = resolve_problem(str(root / relative), size_preset="test" if cpu else "full")
        on, off = evaluators(spec, profile, device, list(EvalSettings().baselines), BaselineSlot())
        with on, off:
            print(f"[judge_honest] {on.describe()}", flush=True)
            rows.append(judge(on, (KERNELS / f"{kernel}.py").read_text(), relative, kernel, "exact rewrite", True))
    for relative, kernel in LOSSES:
        path = small_copy(root / relative, scratch) if cpu else root / relative
        spec = resolve_problem(str(path))
        on, off = evaluators(spec, profile, device, loss_baselines, BaselineSlot())
        with on, off:
            print(f"[judge_honest] {on.describe()}", flush=True)
            for skip, work in SKIPS.items():
                source = (KERNELS / f"{kernel}.py").read_text().replace("SKIP = 0", f"SKIP = {skip}")
                rows.append(judge(on, source, relative, kernel, work, True))
                if skip:
                    rows.append(judge(off, source, relative, kernel, work, False))
    return rows


def percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def times(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def micro(value) -> str:
    return "-" if value is None else f"{value * 1e6:.1f} us"


def markdown(rows: list[dict], header: dict) -> str:
    lines = [f"# Issue 41: exact rewrites and subsampling kernels judged ({header['device']})", "",
             f"Command: `{header['command']}` at commit {header['commit']}; {header['when']}.", "",
             "Fractions: of the **data floor** (what the output depends on, read once, and the output written, over "
             "bandwidth: the plausibility bound) and of the **reference algorithm's roofline** (max(all bytes over "
             "bandwidth, the reference's FLOPs over peak): over 100 % for an algorithm with fewer FLOPs). Coverage: "
             "the coverage trial's seconds (phase `coverage`) and its share of the evaluation's wall time "
             "(`eval_wall_s`, baselines excluded).", "",
             "| problem | kernel | work | coverage trial | verdict | time | vs eager | vs compile | vs max-autotune "
             "| data floor % | ref. roofline % | coverage (s) | share of evaluation | reason |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        coverage = "-" if r["coverage_s"] is None else f"{r['coverage_s']:.3f}"
        reason = r["reason"].replace("|", "/").replace("\n", " ")[:220]
        lines.append(f"| {r['problem']} | {r['kernel']} | {r['work']} | {'on' if r['coverage_trial'] else 'off'} "
                     f"| {r['status']} | {micro(r['time_s'])} | {times(r['speedup_vs_eager'])} "
                     f"| {times(r['speedup_vs_compile'])} | {times(r['speedup_vs_max_autotune'])} "
                     f"| {percent(r['floor_fraction'])} | {percent(r['roofline_fraction'])} | {coverage} "
                     f"| {percent(r['coverage_share'])} | {reason} |")
    done = header["done"]
    lines += ["", f"- every exact rewrite ok: {done['rewrites_ok']}",
              f"- every subsampling kernel rejected by the coverage trial: {done['subsamples_caught']}",
              f"- every honest loss kernel ok: {done['honest_ok']}",
              f"- median coverage share of an evaluation (coverage trial on, ok verdicts): "
              f"{percent(done['median_coverage_share'])}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory for judge_honest.md and judge_honest.json")
    parser.add_argument("--kernelbench", type=Path, default=Path("/work/shared/kernelbench"),
                        help="KernelBench's root (holding level1/, level2/)")
    parser.add_argument("--cpu", action="store_true", help="Triton's CPU interpreter at small sizes")
    parser.add_argument("--loss-baselines", default="eager", help="baselines of the loss problems, comma-separated")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        rows = run(args.kernelbench.resolve(), args.cpu, args.loss_baselines.split(","), Path(scratch))
    ok_shares = sorted(r["coverage_share"] for r in rows if r["coverage_trial"] and r["status"] == "ok"
                       and r["coverage_share"] is not None)
    done = {"rewrites_ok": all(r["status"] == "ok" for r in rows if r["work"] == "exact rewrite"),
            "subsamples_caught": all(r["status"] == "incorrect" and r["reason"].startswith("coverage trial:")
                                     for r in rows if r["coverage_trial"] and r["work"] not in
                                     ("exact rewrite", SKIPS[0])),
            "honest_ok": all(r["status"] == "ok" for r in rows if r["work"] == SKIPS[0]),
            "median_coverage_share": ok_shares[len(ok_shares) // 2] if ok_shares else None}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    header = {"command": "python " + " ".join(sys.argv), "commit": commit or "?",
              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "device": "CPU interpreter" if args.cpu else resolve_profile("auto").display_name, "done": done}
    (args.out / "judge_honest.json").write_text(json.dumps({**header, "rows": rows}, indent=1, default=str))
    (args.out / "judge_honest.md").write_text(markdown(rows, header))
    print(markdown(rows, header))


if __name__ == "__main__":
    main()
