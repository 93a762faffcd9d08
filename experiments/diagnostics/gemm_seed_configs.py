"""A GEMM compiler seed at other tile configurations (issue: compiler seeds): can its Triton template reach cuBLAS
when the launch constants the search tunes are set well? Each configuration is the converted seed with its
``K0_*`` constants replaced, judged and timed by the evaluator against torch.compile in the same evaluator.

    python3 experiments/diagnostics/gemm_seed_configs.py --problem KB/level1/1_Square_matrix_multiplication_.py \
        --cache DIR --out OUT.json [--configs "128,64,32,8,4,3;128,256,32,8,8,3"]

A configuration is BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages[,A_KMAJOR,B_KMAJOR] (the K-major copies of
a seed that has them; left out: as converted); the default list is Inductor's own choice
for the 4096^3 matmul on an H200 first, then the tiles of Triton's matmul tutorial (K halved for fp32 where the
shared memory would not hold the stages).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

CONFIGS = "128,64,32,8,4,3;128,256,32,8,8,3;256,128,32,8,8,3;128,128,32,8,4,4;128,128,32,8,8,3;128,128,64,8,8,3;" \
          "64,256,32,8,4,4;128,64,32,8,4,4;64,128,32,8,4,4;128,128,32,8,4,3"
NAMES = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "NUM_WARPS", "NUM_STAGES", "A_KMAJOR", "B_KMAJOR")


def variant(source: str, values: list[int]) -> str:
    """The seed with kernel 0's template constants set to `values` (all of them values its TUNABLE lists)."""
    for name, value in zip(NAMES, values):
        source = re.sub(rf"^K0_{name} = \d+$", f"K0_{name} = {value}", source, flags=re.M)
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--configs", default=CONFIGS)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    from fitness.evaluation.evaluator import EvalSettings, Evaluator
    from fitness.comparison.policy import load_policy
    from fitness.problems.problem import resolve_problem
    from hardware_profiles import resolve_profile
    from kernelevo.seeds.inductor import inductor_seed, policy_options

    spec, policy, profile = resolve_problem(args.problem), load_policy("triton"), resolve_profile("auto")
    seed = inductor_seed(spec, "cuda", profile.name, Path(args.cache), **policy_options(policy))
    rows = []
    with Evaluator(spec, policy, profile, EvalSettings(trials=2), device="cuda") as evaluator:
        for config in args.configs.split(";"):
            values = [int(v) for v in config.split(",")]
            result = evaluator.evaluate(variant(seed, values), label=config)
            rows.append({"config": dict(zip(NAMES, values)), "status": result.status, "reason": result.reason[:200],
                         "time_s": result.time_s, "compile_s": result.compile_s,
                         "vs_compile": result.speedup_vs_compile})
            print(json.dumps(rows[-1]), flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps({"problem": args.problem, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
