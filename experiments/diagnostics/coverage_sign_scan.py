"""How often the coverage trial finds no usable change for a softmax (the reference a guessed row sum must follow):
`_largest_move` of the committed ``fitness.judge.coverage`` against the one at another commit (REV), over secret
seeds 0..N-1, on one 64 x 2,048 standard normal input under policy ``kernelbench``. A guessed softmax sum
(tests/candidates/softmax_no_max_no_sum.py) got through once in CI: the first elements drawn were all lowered. On
the CPU, from the repository root::

    python3 experiments/diagnostics/coverage_sign_scan.py --seeds 3000 --old 6d40ad8~1
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import tempfile

import torch

from fitness.comparison.policy import load_policy
from fitness.judge import coverage


def module_at(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:fitness/judge/coverage.py"], check=True, capture_output=True,
                            text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("coverage_at_rev", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3000)
    parser.add_argument("--old", required=True)
    args = parser.parse_args()
    policy = load_policy("kernelbench")
    softmax = (lambda t: torch.softmax(t, dim=-1))
    torch.manual_seed(0)
    x = torch.randn(64, 2048)
    base = [softmax(x)]
    for name, module in ((args.old, module_at(args.old)), ("committed", coverage)):
        uncovered = []
        for seed in range(args.seeds):
            change, moved, _ = module._largest_move(softmax, [x], 0, base, policy, torch.Generator().manual_seed(seed))
            if change is None or moved < module.USABLE:
                uncovered.append((seed, round(moved, 3)))
        print(f"{name}: {len(uncovered)} of {args.seeds} seeds found no usable change {uncovered[:10]}")


if __name__ == "__main__":
    main()
