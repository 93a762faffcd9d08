"""kernelevo's recurrent operators in captured code as kernelevo's own Triton RNN (``kernelevo/seeds/kernels/rnn.py``).

The capture swaps a problem's nn.LSTM / nn.GRU for a call of ``torch.ops.kernelevo.lstm`` / ``gru``
(``rnn_ops.py``), which Inductor keeps as a call between its kernels:
``buf0 = torch.ops.kernelevo.lstm.default(arg23_1, arg26_1, arg30_1, [arg2_1, ...], True, 6, False, True)``,
followed by ``buf1 = buf0[0]`` for each output used. Each such call becomes ``lstm(...)`` / ``gru(...)`` (the same
input and initial state; the weights and the structure, ``bias``, ``num_layers``, ``bidirectional``,
``batch_first``, read from the problem's own nn.LSTM / nn.GRU in ModelNew, so the seed follows its init inputs as
it follows its sizes) and the kernel file is copied into the seed; Inductor's other kernels (the Linear on the last
step, say) stay. Each call's launch parameters are constants of the seed declared in ``TUNABLE`` (the launcher's
defaults first): the input projections' GEMM tile ``R<n>_BLOCK_M`` ... ``R<n>_NUM_STAGES``, named as a GEMM template's
(``hardware_profiles.tiles.TILE_PARAMS``, so a hardware profile's GEMM tiles are tried on it too), and the step kernel's
``R<n>_STEP_B`` (batch rows), ``_STEP_H`` (hidden units), ``_STEP_K`` (its reduction's tile), ``_STEP_WARPS``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from kernelevo.core import pyast
from kernelevo.seeds.inductor.errors import SeedError
from hardware_profiles.tiles import TILE_PARAMS
from kernelevo.seeds.inductor.templates import BLOCK_CHOICES

KERNEL_FILE = Path(__file__).resolve().parents[1] / "kernels" / "rnn.py"
LAUNCHER = "rnn_layers"  # the function whose keyword defaults are the launch parameters' defaults
OPERATORS = {"torch.ops.kernelevo.lstm.default": ("lstm", 8), "torch.ops.kernelevo.gru.default": ("gru", 7)}
LAUNCH_KEYWORDS = {"NUM_WARPS": "num_warps", "NUM_STAGES": "num_stages"}  # the others: the launcher's own names
STEP_CHOICES = {"STEP_B": [16, 32, 64], "STEP_H": [16, 32, 64, 128], "STEP_K": [16, 32, 64, 128]}
STEP_PARAMS = ("STEP_B", "STEP_H", "STEP_K", "STEP_WARPS")
STRUCTURE = ("_flat_weights", "bias", "num_layers", "bidirectional", "batch_first")  # the operators' last arguments
FIRST_WEIGHT = "weight_ih_l0"  # the first of an nn.LSTM's / nn.GRU's _flat_weights_names
NOTE = (" Its recurrent layers (nn.LSTM, nn.GRU, which torch.compile cannot capture) are kernelevo's own Triton RNN "
        "(lstm / gru: per layer and direction one GEMM for the input projections and one fused kernel per time "
        "step; kernelevo/seeds/kernels/rnn.py), its launch parameters the R<n>_* constants.")


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

    def __init__(self, warps: list[int], stages: list[int], bound_to: dict | None = None):
        self.count, self.constants, self.tunable = 0, [], {}
        self.bound_to = bound_to or {}  # call()'s argument -> what forward binds it to (``convert.bound``)
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
        args = call.args
        module = self.module_of(args[count - 5]) if len(args) == count else None
        if module:  # the network's weights and structure read from its module, as the sizes are from the inputs
            args = args[:count - 5] + [ast.parse(f"{module}.{a}", mode="eval").body for a in STRUCTURE]
        return ast.Call(func=ast.Name(id=launcher), args=args, keywords=[*call.keywords, *launch])

    def module_of(self, weights: ast.AST) -> str | None:
        """The module whose parameters the operator's weight list binds (``self.lstm`` for ``self.lstm.weight_ih_l0``,
        ``self.get_submodule('body.1')`` for ``self.get_parameter('body.1.weight_ih_l0')``), None where unknown."""
        first = weights.elts[0] if isinstance(weights, ast.List) and weights.elts else None
        value = self.bound_to.get(ast.unparse(first)) if first is not None else None
        if value and value.endswith(f".{FIRST_WEIGHT}"):
            return value[:-len(FIRST_WEIGHT) - 1]
        if value and value.startswith("self.get_parameter(") and f".{FIRST_WEIGHT}'" in value:
            return f"self.get_submodule({ast.literal_eval(value[len('self.get_parameter('):-1]).rpartition('.')[0]!r})"
        return None
