"""Rewrite a seed converted before ``kernelevo.seeds.inductor.launches`` existed (or any candidate whose forward
launches its
kernels as ``kernel[grid](...)``) so that it launches through ``LaunchSites``, as the converter now writes a
launch-heavy seed: to judge the same kernels both ways without capturing again (level3/34's capture takes six
minutes on an H200). The forward's leading ``name = <tensor>`` statements (a converted seed's bindings of its
inputs, parameters and buffers) are what ``LAUNCHES.check`` guards::

    python3 experiments/diagnostics/through_sites.py seed.py > seed_sites.py
"""
from __future__ import annotations

import ast
import sys

from kernelevo.core import pyast
from kernelevo.seeds.inductor import launches


def rewritten(source: str) -> str:
    tree = pyast.parse(source)
    kernels = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
               and any("jit" in ast.unparse(d) for d in node.decorator_list)}
    model = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "ModelNew")
    forward = next(node for node in model.body if isinstance(node, ast.FunctionDef) and node.name == "forward")
    bound = 0
    while bound < len(forward.body) and isinstance(forward.body[bound], ast.Assign) and \
            isinstance(forward.body[bound].value, (ast.Name, ast.Attribute)):
        bound += 1
    tensors = [ast.unparse(s.targets[0]) for s in forward.body[:bound]]
    body, done = launches.through_sites(forward.body[bound:], kernels, tensors, many=1)
    if not done:
        raise SystemExit("no kernel[grid](...) launch in forward")
    forward.body[bound:] = body
    helper = pyast.parse(launches.LAUNCH_SITES_HELPER).body
    at = tree.body.index(model)
    tree.body[at:at] = helper
    return ast.unparse(tree) + "\n"


if __name__ == "__main__":
    sys.stdout.write(rewritten(open(sys.argv[1]).read()))
