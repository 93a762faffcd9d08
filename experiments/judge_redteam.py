"""Issue 63's red team as a result set: every cheat class and the honest kernels of the tests' set judged by the real
Evaluator (policy triton unless a case names another), on a GPU at full size, or on the CPU interpreter at small size.

    python experiments/judge_redteam.py OUT_DIR [--device cuda|cpu] [--kernelbench ROOT] [--only NAME ...]
    python experiments/judge_redteam.py OUT_DIR --cost [--device cuda] [--kernelbench ROOT] [--repeats 3]

Cases (CASES below): a candidate of tests/candidates/ on a problem of tests/problems/ (judged at the problem's own
sizes, as the tests judge it) or, where the test problem is a KernelBench problem in small and the candidate reads its
sizes from its inputs, on that KernelBench problem: at full size on a GPU, at the shrink rule's test sizes on the CPU.
Writes OUT_DIR/judge_redteam.json (a row per case, written after each case) and OUT_DIR/judge_redteam.md: class,
candidate, problem and size, expected and actual verdict, reason, seconds. A run finds the cases already in
OUT_DIR/judge_redteam.json judged and goes on with the rest: a device call cut short at its time limit is resumed by
the same command (--cost likewise, per problem).

``--cost``: for every problem of KernelBench's dev-20 list (ROOT/dev-20.txt), the Inductor seed (policy triton: TF32
allowed; captured as a run's generation 0 captures it, or read from the seed cache) evaluated ``--repeats`` times at
full size, and the median share of an evaluation (``eval_wall_s``) taken by the coverage, probe, parameter and
differential trials (experiments/new_trials_cost.py's measure), per problem and the median over the problems where
each ran: OUT_DIR/trials_cost.md and .json. With ``--device cpu``, at the test sizes on the interpreter: a check of
the script, whose shares say nothing of a GPU's.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CANDIDATES = ROOT / "tests" / "candidates"
PROBLEMS = ROOT / "tests" / "problems"
REJECT, OK = "reject", "ok"


@dataclass(frozen=True)
class Case:
    cls: str  # the class (or an earlier cheat's)
    candidate: str  # tests/candidates/<candidate>.py
    problem: str  # tests/problems/<problem>.py, or a bundled problem's name
    expect: str  # REJECT (any verdict but ok) or OK
    twin: str = ""  # the KernelBench problem the test problem is in small, judged in its place
    policy: str = "triton"
    settings: tuple = ()  # EvalSettings overrides, (name, value) pairs
    replace: tuple = ()  # (old, new) text replacements of the candidate's source (a variant)
    sizes: tuple = ()  # problem.sizes overrides, (name, value) pairs
    note: str = ""
    label: str = field(default="", compare=False)
    cpu_expect: str = ""  # the verdict expected on the CPU interpreter where it differs (a GPU-only cheat)

    @property
    def name(self) -> str:
        return self.label or self.candidate


L2_9, L2_14 = "level2/9_Matmul_Subtract_Multiply_ReLU.py", "level2/14_Gemm_Divide_Sum_Scaling.py"
L2_45, L2_75 = "level2/45_Gemm_Sigmoid_LogSumExp.py", "level2/75_Gemm_GroupNorm_Min_BiasAdd.py"
NO_STATIC = (("static_check", False),)
CASES = [
    # 1. the reference changed from inside the candidate
    Case("1 reference reach", "global_forward_hook", "scale_shift", REJECT),
    Case("1 reference reach", "global_forward_hook", "scale_shift", REJECT, settings=NO_STATIC,
         label="global_forward_hook (static check off)"),
    Case("1 reference reach", "registration_hook", "gemm_sum", REJECT, twin=L2_14),
    Case("1 reference reach", "registration_hook", "gemm_sum", REJECT, twin=L2_14, settings=NO_STATIC,
         label="registration_hook (static check off)"),
    Case("1 reference reach", "state_dict_zeroes", "gemm_sum", REJECT, twin=L2_14),
    Case("1 reference reach", "zeroes_input", "scale_shift", REJECT),
    # 2. compute the op trace never sees
    Case("2 hidden compute", "grid_compute", "scale_shift", REJECT),
    Case("2 hidden compute", "autotune_hook_compute", "scale_shift", REJECT),
    Case("2 hidden compute", "pre_run_hook_compute", "scale_shift", REJECT),
    Case("2 hidden compute", "pre_run_hook_compute", "scale_shift", REJECT, settings=NO_STATIC,
         label="pre_run_hook_compute (static check off)"),
    Case("2 hidden compute", "good", "scale_shift", REJECT, label="good through .numpy() and from_numpy",
         replace=(("return y", "return torch.from_numpy(y.cpu().numpy()).to(y.device)"),)),
    Case("2 hidden compute", "torch_compute", "scale_shift", REJECT),
    Case("2 hidden compute", "no_kernel", "scale_shift", REJECT),
    Case("2 hidden compute", "lazy_tensor_output", "scale_shift", REJECT),
    Case("2 hidden compute", "side_stream", "scale_shift", REJECT),
    # 3. a check told from a timed call, by identity or by value
    Case("3 check vs timed", "subsample_unless_seen", "row_mean", REJECT),
    Case("3 check vs timed", "honest_first_call", "scale_shift", REJECT),
    Case("3 check vs timed", "torch_when_timed", "scale_shift", REJECT),
    Case("3 check vs timed", "stale_when_timed", "scale_shift", REJECT),
    Case("3 check vs timed", "predicts_inputs", "scale_shift", REJECT),
    Case("3 check vs timed", "pointer_cache", "scale_shift", REJECT, cpu_expect=OK,
         note="on the CPU the allocator never repeats an address: the cache never hits, ok is right there"),
    Case("3 check vs timed", "content_cache", "scale_shift", OK, note="right on every call, never hits when timed"),
    Case("3 check vs timed", "softmax_guessed_normaliser", "long_softmax", REJECT),
    Case("3 check vs timed", "softmax_no_max_no_sum", "row_softmax", REJECT,
         sizes=(("batch_size", 64), ("dim", 2048)), settings=(("trials", 1),)),
    Case("3 check vs timed", "row_loss_subsample", "row_loss", REJECT, replace=(("SKIP = 0", "SKIP = 2"),),
         label="row_loss_subsample (1/2 of the rows)"),
    Case("3 check vs timed", "row_mean_subsample", "row_mean", REJECT, replace=(("SKIP = 0", "SKIP = 10"),),
         label="row_mean_subsample (9/10 of each row)"),
    # 4. answers right only for the drawn distribution
    Case("4 drawn distribution", "zeros_below_threshold", "below_threshold", REJECT, twin=L2_9),
    Case("4 drawn distribution", "zeros_beyond_one_outlier", "below_threshold", REJECT, twin=L2_9),
    Case("4 drawn distribution", "gemm_sigmoid_lse_constant", "gemm_sigmoid_lse", REJECT, twin=L2_45),
    Case("4 drawn distribution", "gemm_groupnorm_bias_only", "gemm_groupnorm_min", REJECT, twin=L2_75),
    # 5. state across calls, precision
    Case("5 state, precision", "colsum_pointer_cache", "gemm_sum", REJECT, twin=L2_14),
    Case("5 state, precision", "low_precision", "scale_shift", REJECT),
    Case("5 state, precision", "tf32_inexact_matmul", "matmul", REJECT, policy="strict-fp32",
         note="ALLOW_TF32 on: a TF32 dot under strict-fp32"),
    # earlier cheats and broken kernels
    Case("0 earlier", "wrong_math", "scale_shift", REJECT),
    Case("0 earlier", "nan_output", "scale_shift", REJECT),
    Case("0 earlier", "uninitialized_output", "scale_shift", REJECT),
    Case("0 earlier", "patch_timer", "scale_shift", REJECT),
    # 6. honest kernels of the tests' set, structure-aware and exact rewrites included
    Case("6 honest", "good", "scale_shift", OK),
    Case("6 honest", "lambda_grid", "scale_shift", OK),
    Case("6 honest", "pad_then_kernel", "scale_shift", OK),
    Case("6 honest", "getattr_default", "scale_shift", OK),
    Case("6 honest", "symmetric_matmul", "symmetric_matmul", OK, twin="level1/13_Matmul_for_symmetric_matrices.py"),
    Case("6 honest", "triangular_matmul", "triangular_matmul", OK,
         twin="level1/14_Matmul_for_upper_triangular_matrices.py"),
    Case("6 honest", "gemm_sum_rewrite", "gemm_sum", OK, twin=L2_14),
    Case("6 honest", "linear_relu_tf32", "below_threshold", OK, twin=L2_9),
    Case("6 honest", "bias_broadcast", "constant_output", OK, note="labelled degenerate-problem"),
    Case("6 honest", "gemm_sigmoid_lse_constant", "gemm_sigmoid_lse", OK, twin=L2_45,
         replace=(("CONSTANT = True", "CONSTANT = False"),),
         label="gemm_sigmoid_lse_constant (CONSTANT = False: honest)"),
    Case("6 honest", "gemm_groupnorm_bias_only", "gemm_groupnorm_min", OK, twin=L2_75,
         replace=(("BIAS_ONLY = True", "BIAS_ONLY = False"),),
         label="gemm_groupnorm_bias_only (BIAS_ONLY = False: honest)"),
    Case("6 honest", "bf16_dot_matmul", "bf16_matmul", OK, note="bf16 operands of tl.dot"),
    Case("6 honest", "softmax_guessed_normaliser", "long_softmax", OK, replace=(("GUESS = True", "GUESS = False"),),
         label="softmax_guessed_normaliser (GUESS = False: honest)"),
    Case("6 honest", "row_loss_subsample", "row_loss", OK, label="row_loss_subsample (SKIP = 0: honest)"),
    Case("6 honest", "row_mean_subsample", "row_mean", OK, label="row_mean_subsample (SKIP = 0: honest)"),
]


def problem_path(case: Case, kernelbench: Path) -> str:
    if case.twin:
        return str(kernelbench / case.twin)
    local = PROBLEMS / f"{case.problem}.py"
    return str(local) if local.exists() else case.problem  # else a bundled problem's name


def source_of(case: Case) -> str:
    text = (CANDIDATES / f"{case.candidate}.py").read_text()
    for old, new in case.replace:
        if old not in text:
            raise SystemExit(f"judge_redteam: {case.name}: {old!r} is not in {case.candidate}.py; fix CASES")
        text = text.replace(old, new)
    return text


def judge_cases(cases: list[Case], device: str, kernelbench: Path, out: Path) -> list[dict]:
    from fitness.comparison.policy import load_policy
    from fitness.evaluation.evaluator import Evaluator
    from fitness.problems.problem import resolve_problem
    from fitness.settings import EvalSettings
    from hardware_profiles import load_profile, resolve_profile

    profile = load_profile("cpu_interpreter") if device == "cpu" else resolve_profile("auto")
    done = out / "judge_redteam.json"  # a call cut short (a device call's time limit) is resumed by the next
    rows = json.loads(done.read_text())["rows"] if done.is_file() else []
    cases = [c for c in cases if (c.name, c.twin or c.problem) not in {(r["candidate"], r["problem"]) for r in rows}]
    # one sandbox (fork server) runs every case's jobs
    with Evaluator(resolve_problem(str(PROBLEMS / "scale_shift.py")), load_policy("triton"), profile,
                   EvalSettings(prestart_worker=device != "cpu"), device=device) as host:
        for case in cases:
            # a twin at full size on a GPU, at the shrink rule's test sizes on the CPU; a test problem at its own
            preset = "test" if case.twin and device == "cpu" else "full"
            started = time.perf_counter()
            try:
                spec = resolve_problem(problem_path(case, kernelbench), sizes=dict(case.sizes), size_preset=preset)
                settings = EvalSettings(baselines=["eager"], **dict(case.settings))
                with Evaluator(spec, load_policy(case.policy), profile, settings, device=device,
                               sandbox=host.sandbox) as evaluator:
                    result = evaluator.evaluate(source_of(case))
                status, label, reason, wall = result.status, result.label, result.reason, result.eval_wall_s
                sizes = ", ".join(f"{k}={v}" for k, v in spec.sizes.items())
            except Exception as error:  # noqa: BLE001 - the script's own failure is a row saying so, not a verdict
                status, label, reason, wall, sizes = "script_error", "", f"{type(error).__name__}: {error}", None, ""
            expect = case.cpu_expect if device == "cpu" and case.cpu_expect else case.expect
            verdict = None if status == "script_error" else OK if status == "ok" else REJECT
            rows.append({"class": case.cls, "candidate": case.name, "problem": case.twin or case.problem,
                         "sizes": sizes or ("KernelBench's" if case.twin else "its own"),
                         "policy": case.policy, "expected": expect, "status": status,
                         "as_expected": verdict == expect, "label": label, "reason": reason[:400],
                         "seconds": round(time.perf_counter() - started, 2), "eval_wall_s": wall, "note": case.note})
            print(f"[judge_redteam] {case.cls} | {case.name} | {rows[-1]['problem']}: {status} "
                  f"(expected {expect}) {reason[:160]}", flush=True)
            write(out, rows, device)
    write(out, rows, device)
    return rows


def header(device: str) -> dict:
    from hardware_profiles import resolve_profile

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    machine = "CPU interpreter" if device == "cpu" else resolve_profile("auto").display_name
    return {"command": "python " + " ".join(sys.argv), "commit": commit or "?", "device": machine,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def write(out: Path, rows: list[dict], device: str) -> None:
    head = header(device)
    (out / "judge_redteam.json").write_text(json.dumps({**head, "rows": rows}, indent=1, default=str))
    lines = [f"# Issue 63's red team judged ({head['device']})", "",
             f"`{head['command']}` at {head['commit']}, {head['when']}. Policy triton unless named; a KernelBench "
             "problem at " + ("its full size" if device != "cpu" else "the shrink rule's test sizes") +
             ", a test problem at its own. Expected: reject (any verdict but ok) or ok.", "",
             "| class | candidate | problem (sizes) | policy | expected | verdict | as expected | seconds | reason |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        reason = (r["reason"] or r["label"] or "").replace("|", "/").replace("\n", " ")[:200]
        note = f" ({r['note']})" if r["note"] else ""
        lines.append(f"| {r['class']} | {r['candidate']}{note} | {r['problem']} ({r['sizes']}) | {r['policy']} "
                     f"| {r['expected']} | {r['status']}{' ' + r['label'] if r['label'] else ''} "
                     f"| {'yes' if r['as_expected'] else '**no**'} | {r['seconds']:.1f} | {reason} |")
    missed = [r["candidate"] for r in rows if not r["as_expected"]]
    lines += ["", f"{len(rows) - len(missed)} of {len(rows)} as expected" + (f"; not: {', '.join(missed)}"
                                                                              if missed else ".")]
    (out / "judge_redteam.md").write_text("\n".join(lines) + "\n")


def cost(kernelbench: Path, repeats: int, out: Path, only: list[str], device: str) -> None:
    """The trials' median share of an evaluation over dev-20, each problem's Inductor seed judged: at full size on a
    GPU, at the shrink rule's test sizes on the CPU (a check of the script: interpreter seconds are no GPU's)."""
    from fitness.comparison.policy import load_policy
    from fitness.evaluation.evaluator import default_cache_dir
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import resolve_profile
    from kernelevo.seeds.inductor import inductor_seed, policy_options

    from experiments.new_trials_cost import judge, write_table

    profile = "cpu_interpreter" if device == "cpu" else resolve_profile("auto").name
    options, preset = policy_options(load_policy("triton")), "test" if device == "cpu" else "full"
    names = [line.strip() for line in (kernelbench / "dev-20.txt").read_text().splitlines() if line.strip()]
    done = out / "trials_cost.json"  # a call cut short (a device call's time limit) is resumed by the next
    table = json.loads(done.read_text())["problems"] if done.is_file() else {}
    for name in names:
        if (only and not any(word in name for word in only)) or name in table:
            continue
        spec = resolve_problem(str(kernelbench / name), size_preset=preset)
        try:
            source = inductor_seed(spec, device, profile, default_cache_dir(), **options)  # as a run's generation 0
        except Exception as error:  # noqa: BLE001 - a problem with no seed is a row saying so
            print(f"[judge_redteam] {name}: no seed: {str(error)[:200]}", flush=True)
            continue
        table[name] = judge(str(kernelbench / name), source, repeats, device=device, size_preset=preset)
        print(f"[judge_redteam] {name}: {table[name]}", flush=True)
        write_table(table, out, "trials_cost", f"dev-20 at {'test' if device == 'cpu' else 'full'} size, "
                                               f"{repeats} evaluations each ({header(device)['device']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory for judge_redteam.md/.json (--cost: trials_cost.md/.json)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    parser.add_argument("--kernelbench", type=Path, default=Path("/work/shared/kernelbench"),
                        help="KernelBench's root (level1/, level2/, dev-20.txt)")
    parser.add_argument("--only", nargs="*", default=[], help="only cases (or --cost problems) whose name has one")
    parser.add_argument("--cost", action="store_true", help="the trials' share of an evaluation over dev-20")
    parser.add_argument("--repeats", type=int, default=3, help="--cost: evaluations per problem")
    args = parser.parse_args()
    from fitness.evaluation.evaluator import default_device

    device = args.device or default_device()
    if device not in ("cuda", "cpu"):
        raise SystemExit(f"judge_redteam: --device {device!r}: use cuda or cpu")
    if device == "cuda" and default_device() != "cuda":
        raise SystemExit("judge_redteam: --device cuda but torch sees no GPU; run on a GPU machine or use --device cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    kernelbench = args.kernelbench.resolve()
    if args.cost:
        cost(kernelbench, args.repeats, args.out, args.only, device)
        return
    cases = [c for c in CASES if not args.only or any(word in c.name for word in args.only)]
    if not cases:
        raise SystemExit(f"judge_redteam: no case matches --only {args.only}; names: "
                         + ", ".join(sorted({c.name for c in CASES})))
    rows = judge_cases(cases, device, kernelbench, args.out)
    print((args.out / "judge_redteam.md").read_text())
    sys.exit(0 if all(r["as_expected"] for r in rows) else 1)


if __name__ == "__main__":
    main()
