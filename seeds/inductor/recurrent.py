"""kernelevo's recurrent operators in captured code as kernelevo's own Triton RNN (``seeds/kernels/rnn.py``).

The capture swaps a problem's nn.LSTM / nn.GRU for a call of ``torch.ops.kernelevo.lstm`` / ``gru``
(``rnn_ops.py``), which Inductor keeps as a call between its kernels:
``buf0 = torch.ops.kernelevo.lstm.default(arg23_1, arg26_1, arg30_1, [arg2_1, ...], True, 6, False, True)``,
followed by ``buf1 = buf0[0]`` for each output used. Each such call becomes ``lstm(...)`` / ``gru(...)`` (the same
arguments) and the kernel file is copied into the seed; Inductor's other kernels (the Linear on the last step, say)
stay. Each call's launch parameters are constants of the seed declared in ``TUNABLE`` (the launcher's defaults
first): the input projections' GEMM tile ``R<n>_BLOCK_M`` ... ``R<n>_NUM_STAGES``, named as a GEMM template's
(``templates.TILE_PARAMS``, so a hardware profile's GEMM tiles are tried on it too), and the step kernel's
``R<n>_STEP_B`` (batch rows), ``_STEP_H`` (hidden units), ``_STEP_K`` (its reduction's tile), ``_STEP_WARPS``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from core import pyast
from seeds.inductor.errors import SeedError
from seeds.inductor.templates import BLOCK_CHOICES, TILE_PARAMS

KERNEL_FILE = Path(__file__).resolve().parents[1] / "kernels" / "rnn.py"
LAUNCHER = "rnn_layers"  # the function whose keyword defaults are the launch parameters' defaults
OPERATORS = {"torch.ops.kernelevo.lstm.default": ("lstm", 8), "torch.ops.kernelevo.gru.default": ("gru", 7)}
LAUNCH_KEYWORDS = {"NUM_WARPS": "num_warps", "NUM_STAGES": "num_stages"}  # the others: the launcher's own names
STEP_CHOICES = {"STEP_B": [16, 32, 64], "STEP_H": [16, 32, 64, 128], "STEP_K": [16, 32, 64, 128]}
STEP_PARAMS = ("STEP_B", "STEP_H", "STEP_K", "STEP_WARPS")
NOTE = (" Its recurrent layers (nn.LSTM, nn.GRU, which torch.compile cannot capture) are kernelevo's own Triton RNN "
        "(lstm / gru: per layer and direction one GEMM for the input projections and one fused kernel per time "
        "step; seeds/kernels/rnn.py), its launch parameters the R<n>_* constants.")


def is_recurrent(call: ast.AST) -> bool:
    """Whether `call` is a call of kernelevo's recurrent operators."""
    return isinstance(call, ast.Call) and ast.unparse(call.func) in OPERATORS


def launcher_defaults() -> dict:
    """The launch parameters (TILE_PARAMS' and STEP_PARAMS' names) and their defaults, as the kernel file writes
    them."""
    function = next(n for n in pyast.parse(KERNEL_FILE.read_text()).body
                    if isinstance(n, ast.FunctionDef) and n.name == LAUNCHER)
    names = [a.arg for a in function.args.args][-len(function.args.defaults):]
    found = {name: ast.literal_eval(value) for name, value in zip(names, function.args.defaults)}
    return {param: found[LAUNCH_KEYWORDS.get(param, param)] for param in (*TILE_PARAMS, *STEP_PARAMS)}


class Recurrents:
    """Rewrites the recurrent operator calls of one ``call`` body (``launch``); what the seed then needs:
    ``constants`` (name, value), ``tunable`` (name -> choices), ``count`` (calls rewritten)."""

    def __init__(self, warps: list[int], stages: list[int]):
        self.count, self.constants, self.tunable = 0, [], {}
        self.choices = {**BLOCK_CHOICES, **STEP_CHOICES, "NUM_WARPS": warps, "NUM_STAGES": stages,
                        "STEP_WARPS": warps}
        self.defaults = launcher_defaults()

    def launch(self, call: ast.Call) -> ast.Call:
        """``lstm(...)`` / ``gru(...)`` for a call of ``torch.ops.kernelevo.lstm`` / ``gru``; SeedError where its
        arguments are not the operator's."""
        launcher, count = OPERATORS[ast.unparse(call.func)]
        if len(call.args) + len(call.keywords) != count or any(k.arg is None for k in call.keywords):
            raise SeedError(f"Inductor's {ast.unparse(call)[:200]} does not pass the {count} arguments of "
                            f"kernelevo's {launcher} operator")
        prefix = f"R{self.count}_"
        self.count += 1
        for param, value in self.defaults.items():
            self.constants.append((prefix + param, value))
            self.tunable[prefix + param] = sorted(set(self.choices[param]) | {value})
        launch = [ast.keyword(arg=LAUNCH_KEYWORDS.get(p, p), value=ast.Name(id=prefix + p)) for p in self.defaults]
        return ast.Call(func=ast.Name(id=launcher), args=call.args, keywords=[*call.keywords, *launch])
