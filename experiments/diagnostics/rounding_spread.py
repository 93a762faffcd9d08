"""Is each element's spread (fitness/judge/rounding.py ``perturbed_spread``) a fair allowance for KernelBench
level3/49 (Mamba2's final state)? On the CPU, at fewer batch rows than the file's 2048, per model seed: how many
elements an honest reordering of the algebra (cumulative sums as triangular matmuls, the einsums in another order:
``tests/fitness/test_rounding_spread.honest``) misses the plain comparison, the magnitude classes' allowance and the
spread's (K = 8), and the largest ratio of each output's error to its allowance (spread, or atol + rtol |exact| over
K), for the honest reordering, the fp32 reference itself and two wrong kernels (the parameter A off by 1e-4; 1 % of
the elements zeroed). Needs einops (`pip install --target DIR einops`, then PYTHONPATH=DIR)::

    PYTHONPATH=/tmp/m49/site .venv/bin/python experiments/diagnostics/rounding_spread.py \\
        --problem ../shared/kernelbench/level3/49_Mamba2ReturnFinalState.py --batch 256 --seeds 4 \\
        > experiments/results/rounding_spread_cpu/table.md
    # the same with --ulps 1 > experiments/results/rounding_spread_cpu/ulps1.md (the first choice, too tight)
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from fitness.comparison.correctness import compare_tensor  # noqa: E402
from fitness.comparison.policy import load_policy  # noqa: E402
from fitness.judge.rounding import PERTURBATION_ULPS, PERTURBATIONS, compare_with_allowance, perturbed_spread  # noqa
from fitness.problems.problem import load_problem, resolve_problem  # noqa: E402
from test_rounding_spread import K, honest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problem", required=True)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=PERTURBATIONS)
    parser.add_argument("--ulps", type=float, default=PERTURBATION_ULPS)
    args = parser.parse_args()
    problem = load_problem(resolve_problem(args.problem))
    tol = load_policy("triton").tolerance_for(torch.float32)
    print(f"# level3/49 on the CPU, batch {args.batch}, K = {K:g}, spread over {args.runs} runs perturbed by "
          f"{args.ulps:g} u, torch {torch.__version__}\n")
    print("| model seed | candidate | elements | over plain | over classes | over spread | max error / allowance |")
    print("|---|---|---|---|---|---|---|")
    for seed in range(args.seeds):
        torch.manual_seed(100 + seed)
        init = problem.get_init_inputs()
        init[0] = args.batch
        model = problem.Model(*init)
        x = torch.rand(args.batch, *problem.get_inputs()[0].shape[1:])
        with torch.no_grad():
            ref = model(x)
            exact = copy.deepcopy(model).double()(x.double())
            spread = perturbed_spread(model, [x], runs=args.runs, ulps=args.ulps)[0]
            wrong = copy.deepcopy(model)
            wrong.A.mul_(1 + 1e-4)
            candidates = {"honest reordering": honest(model, x), "fp32 reference": ref,
                          "A off by 1e-4 (wrong)": wrong(x), "1 % zeroed (wrong)": ref * (torch.rand_like(ref) > 0.01)}
        base = (tol.atol + tol.rtol * exact.abs()) / K
        for name, out in candidates.items():
            error = (out.double() - exact).abs()
            counts = [_over(compare_tensor(out, ref, tol)),
                      _over(compare_with_allowance(out, ref, exact, tol, K)[0]),
                      _over(compare_with_allowance(out, ref, exact, tol, K, spread=spread)[0])]
            ratio = float((error / torch.maximum(spread.double(), base)).max())
            print(f"| {100 + seed} | {name} | {out.numel():,} | " + " | ".join(counts) + f" | {ratio:.2f} |")


def _over(comparison) -> str:
    """How many elements a comparison found over its bound (0 when it passed)."""
    return "0" if comparison.ok else comparison.reason.split(": ", 1)[1].split(" of ")[0]


if __name__ == "__main__":
    main()
