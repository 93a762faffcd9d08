"""How often the coverage trial's calibration falls short on a problem: for N input seeds, the reference and its
inputs drawn anew, the move (in tolerance units) ``fitness.judge.coverage.calibrate`` reaches for one input under a
policy, and the seeds where it stays below a threshold (not covered, or shrunk for the policy's precision to a move
too small to expose a rescaled subsample). CI failed at b1293fe on tests/problems/gemm_sum.py's x: 9 of 200 seeds
short of 1e4 before 745ae0c, 0 of 400 after. CPU only::

    TRITON_INTERPRET=1 .venv/bin/python experiments/diagnostics/coverage_calibration.py tests/problems/gemm_sum.py \
        --seeds 400 [--policy triton] [--input 0] [--below 1e4]
"""
import argparse
import importlib.util
import sys

import torch

from fitness.comparison.correctness import as_tensor_list
from fitness.comparison.policy import load_policy
from fitness.judge.coverage import calibrate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--policy", default="triton")
    parser.add_argument("--input", type=int, default=0, help="which forward input to change")
    parser.add_argument("--below", type=float, default=1e4, help="a move below this counts as short")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("problem", args.problem)
    problem = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(problem)
    policy = load_policy(args.policy)
    short = 0
    for seed in range(args.seeds):
        torch.manual_seed(seed)
        model, inputs = problem.Model(*problem.get_init_inputs()), problem.get_inputs()
        with torch.no_grad():
            base = [o.clone() for o in as_tensor_list(model(*inputs))]
        found = calibrate(model, inputs, args.input, base, policy, torch.Generator().manual_seed(seed))
        if found.moved < args.below:
            short += 1
            print(f"seed {seed}: moved {found.moved:.3g} (shrunk from {found.shrunk_from}, "
                  f"not covered at the policy's precision: {found.imprecise})")
    print(f"{short} of {args.seeds} seeds short of {args.below:g} tolerances ({args.problem}, input {args.input}, "
          f"policy {args.policy})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
