"""The work kernelevo's transposed convolution plans, split by output phase, against the gather form it replaced:
(output position, kernel tap) pairs visited, for each ConvTranspose layer of the KernelBench problems given, at the
problem file's own sizes (the model built and run on the meta device: no memory, no GPU). CPU only::

    .venv/bin/python experiments/diagnostics/conv_phase_work.py --root /work/shared/kernelbench \
        level1/72 level1/73 level1/75 level1/77 level1/79 level1/81 level1/57 level2/3
"""
import argparse
import math
import sys

import torch

from fitness.problems.problem import load_problem, resolve_problem
from fitness.problems.speed_of_light import meta_build
from kernelevo.seeds.kernels.conv import conv_phases
from evo.benchmark.selection import select


def layer_work(layer: torch.nn.Module, out_shape) -> tuple[int, int, int]:
    """(pairs the phase split visits, pairs the gather form visited, launches) for one transposed layer."""
    dims = len(layer.kernel_size)
    pad = [1] * (3 - dims)  # 1D and 2D as 3D, as conv_nd does
    sizes, kernel = [*pad, *out_shape[-dims:]], [*pad, *layer.kernel_size]
    stride, dilation = [*pad, *layer.stride], [*pad, *layer.dilation]
    padding = [0] * (3 - dims) + list(layer.padding)
    phases = conv_phases(sizes, kernel, stride, padding, dilation, True)
    split = sum(math.prod(p[2] for p in phase) * math.prod(p[8] for p in phase) for phase in phases)
    return split, math.prod(sizes) * math.prod(kernel), len(phases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="a KernelBench checkout (levels 1-3)")
    parser.add_argument("problems", nargs="+", help="level<N>/<id> or a file under the root")
    args = parser.parse_args()
    print("| problem | layer | stride | dilation | launches | pairs, phase split | pairs, gather form | less work |")
    print("|---|---|---|---|---|---|---|---|")
    for task in select(args.root, None, args.problems):
        model, inputs = meta_build(load_problem(resolve_problem(task.problem)))
        outputs = {}
        hooks = [m.register_forward_hook(lambda m, i, o: outputs.__setitem__(m, o.shape))
                 for m in model.modules() if isinstance(m, torch.nn.modules.conv._ConvTransposeNd)]
        with torch.no_grad():
            model(*inputs)
        for hook in hooks:
            hook.remove()
        if not outputs:
            print(f"| {task.name} | (no transposed convolution) | | | | | | |")
        for layer, shape in outputs.items():
            split, gather, launches = layer_work(layer, shape)
            print(f"| {task.name} | {type(layer).__name__} | {tuple(layer.stride)} | {tuple(layer.dilation)} | "
                  f"{launches} | {split:,} | {gather:,} | {gather / split:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
