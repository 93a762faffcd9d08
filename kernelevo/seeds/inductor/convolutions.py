"""Inductor's library convolutions as kernelevo's own Triton convolution (``kernelevo/seeds/kernels/conv.py``).

The capture leaves every convolution to the library (``template_choices.LIBRARY_CONVOLUTIONS``: never Inductor's
Triton conv templates), so Inductor's code calls it: ``buf2 = extern_kernels.convolution(buf0, buf1, arg1_1,
stride=(2, 2), ...)``, usually followed by ``assert_size_stride(buf2, size, stride)``, the layout its later kernels
read the output in. Under policy ``triton`` each such call becomes ``conv_nd(...)`` (the same arguments, the output
allocated with the strides Inductor asserts) and the kernel's file is copied into the seed; Inductor's other kernels
(the fused pointwise and reductions around the convolution) stay. Each call's launch parameters are constants of the
seed (``C<n>_BLOCK_M`` ... ``C<n>_NUM_STAGES``, the kernel's defaults first) declared in ``TUNABLE``, named as a GEMM
template's tiles are (``hardware_profiles.tiles.TILE_PARAMS``), so a hardware profile's GEMM tiles are tried on them
too, and ``C<n>_CHANNELS_LAST`` (1: the implicit GEMM reads a channels-last copy of the input; 0: the input as it
is), and for a transposed convolution ``C<n>_W_PHASES`` (0: its rows gathered, not split by output phase); a call
whose every launch takes conv.py's direct or depthwise path (seen from the weight's sizes Inductor asserts) keeps
``C<n>_BLOCK_K``, ``C<n>_GROUP_M`` and ``C<n>_CHANNELS_LAST`` out of ``TUNABLE`` (those kernels ignore them).
"""
from __future__ import annotations

import ast
import math
from pathlib import Path

import torch

from kernelevo.core import pyast
from kernelevo.seeds.inductor.errors import SeedError, arguments_by_name
from hardware_profiles.tiles import TILE_PARAMS
from kernelevo.seeds.inductor.templates import BLOCK_CHOICES

KERNEL_FILE = Path(__file__).resolve().parents[1] / "kernels" / "conv.py"
LAUNCHER = "conv_nd"
LIBRARY_CALL = "extern_kernels.convolution"
PARAMETERS = [a.name for a in torch.ops.aten.convolution.default._schema.arguments]  # input, weight, bias, ...
LAUNCH_KEYWORDS = {"NUM_WARPS": "num_warps", "NUM_STAGES": "num_stages"}  # the others: the launcher's own names
PARAMS = (*TILE_PARAMS, "CHANNELS_LAST", "W_PHASES")  # conv_nd's launch parameters: a tile's, the input's layout,
# and whether a transposed convolution's rows are split by output phase (tuned only for a transposed one)
DIRECT_UNUSED = ("BLOCK_K", "GROUP_M", "CHANNELS_LAST")  # what conv.py's direct and depthwise paths ignore: not tuned
NOTE = (" Inductor's library convolutions (torch.convolution) are kernelevo's own Triton convolution (conv_nd, an "
        "implicit GEMM over channels-last data, a depthwise kernel, or a direct convolution where a group's GEMM is "
        "too small for tl.dot; a transposed one split by output phase into one launch per residue of the output "
        "modulo the stride; "
        "kernelevo/seeds/kernels/conv.py), its launch parameters the C<n>_* constants.")


def launcher_defaults() -> dict:
    """The launch parameters of ``conv_nd`` (``PARAMS``) and their defaults, as its file writes them."""
    function = next(n for n in pyast.parse(KERNEL_FILE.read_text()).body
                    if isinstance(n, ast.FunctionDef) and n.name == LAUNCHER)
    names = [a.arg for a in function.args.args][-len(function.args.defaults):]
    found = {name: ast.literal_eval(value) for name, value in zip(names, function.args.defaults)}
    return {param: found[LAUNCH_KEYWORDS.get(param, param)] for param in PARAMS}


def kernel_source(tf32: bool = False, path: Path = KERNEL_FILE) -> str:
    """The kernel file's kernels and launchers (its docstring and imports left out: the seed has its own; `path`:
    another of kernelevo/seeds/kernels/, ``attention.py``'s or ``rnn.py``'s); with `tf32`, its dot products in TF32 (the
    policy allows it; ``precision.ieee_dots`` takes them back to IEEE fp32)."""
    text = Path(path).read_text()
    first = next(n for n in pyast.parse(text).body if isinstance(n, ast.FunctionDef))
    start = min([first.lineno, *(d.lineno for d in first.decorator_list)])
    code = "\n".join(text.splitlines()[start - 1:])
    return code.replace('input_precision="ieee"', 'input_precision="tf32"') if tf32 else code


class Convolutions:
    """Rewrites the library convolutions of one ``call`` body (``launch``); what the seed then needs: ``constants``
    (name, value), ``tunable`` (name -> choices), ``count`` (calls rewritten)."""

    def __init__(self, call_body: list[ast.stmt], warps: list[int], stages: list[int]):
        self.count, self.constants, self.tunable = 0, [], {}
        self.choices = {**BLOCK_CHOICES, "NUM_WARPS": warps, "NUM_STAGES": stages, "CHANNELS_LAST": [0, 1],
                        "W_PHASES": [0, 1]}
        self.defaults = launcher_defaults()
        self.layouts = {}  # output buffer -> the strides Inductor asserts it has
        self.sizes = {}  # argument or buffer -> the sizes Inductor asserts it has
        for node in ast.walk(ast.Module(body=call_body, type_ignores=[])):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("assert_size_stride") and \
                    len(node.args) >= 3:
                self.layouts[ast.unparse(node.args[0])] = ast.unparse(node.args[2])
                self.sizes[ast.unparse(node.args[0])] = ast.unparse(node.args[1])

    def launch(self, target: str, call: ast.Call) -> ast.Call:
        """``conv_nd(...)`` for ``target = extern_kernels.convolution(...)``; SeedError where the call's arguments
        are not torch.convolution's."""
        given = arguments_by_name(call, PARAMETERS, "torch.convolution")
        missing = [p for p in PARAMETERS if p not in given and p != "bias"]
        if missing or len(call.args) > len(PARAMETERS):
            raise SeedError(f"Inductor's {ast.unparse(call)[:200]} does not give torch.convolution's "
                            f"{', '.join(missing) or 'arguments'} as kernelevo's convolution needs them")
        prefix = f"C{self.count}_"
        self.count += 1
        unused = (DIRECT_UNUSED if self._direct(given) else ()) + \
            (() if ast.unparse(given["transposed"]) == "True" else ("W_PHASES",))
        for param in PARAMS:
            value = self.defaults[param]
            self.constants.append((prefix + param, value))
            if param not in unused:
                self.tunable[prefix + param] = sorted(set(self.choices[param]) | {value})
        arguments = [ast.unparse(given[p]) if p in given else "None" for p in PARAMETERS]
        layout = [f"out_stride={self.layouts[target]}"] if target in self.layouts else []
        launch = [f"{LAUNCH_KEYWORDS.get(p, p)}={prefix}{p}" for p in PARAMS]
        return ast.parse(f"{LAUNCHER}({', '.join(arguments + layout + launch)})", mode="eval").body

    def _direct(self, given: dict) -> bool:
        """Whether every launch of the call takes conv.py's depthwise or direct path (``depthwise_path``,
        ``direct_path``), as far as Inductor's code says: a forward convolution with literal groups whose weight's
        sizes it asserts as literals (a depthwise one: level1/84)."""
        try:
            transposed, groups = (ast.literal_eval(given[p]) for p in ("transposed", "groups"))
            sizes = ast.literal_eval(self.sizes.get(ast.unparse(given["weight"]), "None"))
        except (ValueError, SyntaxError):  # not literals
            return False
        if transposed is not False or type(groups) is not int or not isinstance(sizes, tuple) or len(sizes) < 3 or \
                not all(type(size) is int for size in sizes):
            return False
        from kernelevo.seeds.kernels.conv import depthwise_path, direct_path  # imports triton

        return depthwise_path(sizes[1], transposed) or direct_path(sizes[1], sizes[0] // groups, math.prod(sizes[2:]),
                                                                   groups)
