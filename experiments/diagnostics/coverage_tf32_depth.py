"""The coverage trial on an honest TF32 kernel of a deep MLP, with the reference at the policy's precision emulated
two ways (``fitness.judge.tf32``): rounding only the inputs and weights (before c606459) and rounding every matmul's
operands (``TF32Operands``). The kernel computes every Linear on operands rounded as a Triton dot on Hopper does.
level3/3 DeepNarrowMLP's TF32 seed was rejected on 4 x H100 (``experiments/results/kernelbench_h100x4/``).

    python3 experiments/diagnostics/coverage_tf32_depth.py --seeds 10 --depths 1 4 16 > table.md
"""
import argparse

import torch
import torch.nn as nn

from fitness.comparison.correctness import as_tensor_list
from fitness.comparison.policy import load_policy
from fitness.judge.coverage import coverage_trial
from fitness.judge.tf32 import TF32_MODES, TF32Operands, TF32Reference, tf32_rounded


class InputsAndWeightsOnly(TF32Reference):
    """The emulation before c606459: the inputs and weights rounded, the activations between layers not."""

    def __call__(self, reference, inputs, policy):
        with torch.no_grad():
            return [as_tensor_list(self._model(reference, mode)(*[tf32_rounded(x, mode) for x in inputs]))
                    for mode in TF32_MODES]


def trial(depth: int, seed: int, emulation) -> dict:
    torch.manual_seed(seed)
    layers, size = [], 512
    for _ in range(depth):
        layers += [nn.Linear(size, 64), nn.ReLU()]
        size = 64
    model = nn.Sequential(*layers, nn.Linear(size, 256)).eval()
    x = torch.rand(16, 512, generator=torch.Generator().manual_seed(seed))

    def tf32_kernel(buffers, saved, where, name=None):
        with torch.no_grad(), TF32Operands("toward zero"):
            return model(*buffers)

    return coverage_trial(model, tf32_kernel, [x], None, ["x"], load_policy("triton"),
                          torch.Generator().manual_seed(seed), lambda b: [t.clone() for t in b], None, emulation())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()
    print("| hidden layers | emulation | rejected (of seeds) | median move (tolerances) |\n|---|---|---|---|")
    for depth in args.depths:
        for name, emulation in (("inputs and weights only", InputsAndWeightsOnly), ("every matmul's operands",
                                                                                 TF32Reference)):
            found = [trial(depth, seed, emulation) for seed in range(args.seeds)]
            moves = sorted(f["inputs"].get("x", 0.0) for f in found)
            print(f"| {depth} | {name} | {sum('failure' in f for f in found)} of {args.seeds} | "
                  f"{moves[len(moves) // 2]:.0f} |")


if __name__ == "__main__":
    main()
