"""Inductor's library attention calls as kernelevo's own Triton flash attention
(``kernelevo/seeds/kernels/attention.py``).

For ``scaled_dot_product_attention`` Inductor's code calls an ATen attention op (``OPS``): on the CPU
``buf0 = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(arg0_1, arg1_1, arg2_1, 0.0, True)``, on
a GPU ``_scaled_dot_product_flash_attention`` / ``_efficient_attention`` / ``_cudnn_attention`` (or the overrideable
op of other backends), each returning a tuple of which the code reads ``buf1 = buf0[0]`` (the output; ``[1]``, the
logsumexp, where a backward would need it), usually followed by ``assert_size_stride(buf1, size, stride)``, the
layout its later kernels read it in. Under policy ``triton`` each such call becomes ``flash_attention(...)`` (the
query, key, value, ``is_causal`` and ``scale`` of the call, the outputs allocated with the strides Inductor asserts)
and the kernel's file is copied into the seed; Inductor's other kernels stay. A call the kernel cannot compute (an
attention mask or bias, dropout, an output of the tuple past the logsumexp) is refused with the reason
(``AttentionRefused``), and the seed's error names the library call. Each call's launch parameters are constants of
the seed (``A<n>_BLOCK_M`` ... ``A<n>_NUM_STAGES``, the launcher's defaults first) declared in ``TUNABLE``. Where
the library's attention stays (policy ``kernelbench``, or to name it), it is written as torch's public
``scaled_dot_product_attention`` (a candidate may not call ``torch.ops``).
"""
from __future__ import annotations

import ast
from pathlib import Path

import torch

from kernelevo.core import pyast
from kernelevo.seeds.inductor.convolutions import kernel_source as kernel_file_source
from kernelevo.seeds.inductor.errors import SeedError, arguments_by_name

KERNEL_FILE = Path(__file__).resolve().parents[1] / "kernels" / "attention.py"
LAUNCHER = "flash_attention"
NAMES = ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_fused_attention_overrideable")
# each op's arguments, by its schema in the installed torch (an op this torch lacks is not one Inductor can emit)
OPS = {name: [a.name for a in getattr(torch.ops.aten, name).default._schema.arguments]
       for name in NAMES if hasattr(torch.ops.aten, name)}
TAKEN = ("query", "key", "value", "is_causal", "scale")  # what flash_attention computes from the call
MASKS = ("attn_mask", "attn_bias")  # must be None
OUTPUTS = 2  # the tuple items flash_attention gives: output, logsumexp
PUBLIC = "torch.nn.functional.scaled_dot_product_attention"  # the library's attention, as a candidate may call it
LAUNCH = {"BLOCK_M": "BLOCK_M", "BLOCK_N": "BLOCK_N", "BLOCK_K": "BLOCK_K", "VALUE_BLOCK": "VALUE_BLOCK",
          "NUM_WARPS": "num_warps", "NUM_STAGES": "num_stages"}  # the seed's constant -> the launcher's keyword
BLOCKS = [16, 32, 64, 128, 256]
NOTE = (" Inductor's library attention calls (torch.ops.aten._scaled_dot_product_*_attention) are kernelevo's own "
        "Triton flash attention (flash_attention; kernelevo/seeds/kernels/attention.py), its launch parameters the "
        "A<n>_* constants.")


class AttentionRefused(SeedError):
    """An attention call kernelevo's flash attention cannot compute; the message says why."""


def attention_op(name: str) -> str | None:
    """The ATen attention op a called name is (``torch.ops.aten.X.default``, ``aten.X``, ...), or None."""
    parts = name.split(".")
    parts = parts[3:] if parts[:3] == ["torch", "ops", "aten"] else parts[1:] if parts[:1] == ["aten"] else []
    return parts[0] if parts and parts[0] in OPS and parts[1:] in ([], ["default"]) else None


def launcher_defaults() -> dict:
    """The launch parameters of ``flash_attention`` (the seed's names) and their defaults, as its file writes them."""
    function = next(n for n in pyast.parse(KERNEL_FILE.read_text()).body
                    if isinstance(n, ast.FunctionDef) and n.name == LAUNCHER)
    names = [a.arg for a in function.args.args][-len(function.args.defaults):]
    found = {name: ast.literal_eval(value) for name, value in zip(names, function.args.defaults)}
    return {param: found[keyword] for param, keyword in LAUNCH.items()}


def kernel_source(tf32: bool = False) -> str:
    """The kernel file's kernels and launcher, as ``convolutions.kernel_source`` copies its own."""
    return kernel_file_source(tf32, KERNEL_FILE)


def _layouts(body: list[ast.stmt]) -> dict:
    """buffer -> the strides Inductor's code asserts it has."""
    return {ast.unparse(n.args[0]): ast.unparse(n.args[2]) for n in ast.walk(ast.Module(body=body, type_ignores=[]))
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("assert_size_stride") and len(n.args) >= 3}


class Attentions:
    """Rewrites the library attention calls of one ``call`` body (``rewrite``): with `own`, as launches of kernelevo's
    flash attention (``launch``), else as torch's public function (``library``: a candidate may not call
    ``torch.ops``); what the seed then needs: ``constants`` (name, value), ``tunable`` (name -> choices), ``count``
    (calls made kernelevo's)."""

    def __init__(self, call_body: list[ast.stmt], warps: list[int], stages: list[int], own: bool = True):
        self.body, self.own, self.count, self.constants, self.tunable = call_body, own, 0, [], {}
        self.choices = {"NUM_WARPS": warps, "NUM_STAGES": stages}
        self.defaults = launcher_defaults()
        self.layouts = _layouts(call_body)

    def rewrite(self, target: str, call: ast.Call) -> ast.expr:
        return self.launch(target, call) if self.own else self.library(target, call)

    def _items(self, target: str, text: str, outputs: int, gives: str) -> dict:
        """{tuple index: the name it is bound to} for each read of `target` (``buf1 = buf0[0]``); `error` (the
        replacement `gives` only the first `outputs` items) where the code reads the tuple otherwise or past them."""
        error = AttentionRefused if self.own else SeedError
        items, subscripts = {}, set()
        for node in ast.walk(ast.Module(body=self.body, type_ignores=[])):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript) and \
                    ast.unparse(node.value.value) == target and len(node.targets) == 1:
                items.setdefault(ast.unparse(node.value.slice), ast.unparse(node.targets[0]))
            if isinstance(node, ast.Subscript) and ast.unparse(node.value) == target:
                subscripts.add(id(node.value))
                index = node.slice.value if isinstance(node.slice, ast.Constant) else None
                if not isinstance(index, int) or not 0 <= index < outputs:
                    raise error(f"Inductor's code reads {ast.unparse(node)} of {text}: {gives}")
        for node in ast.walk(ast.Module(body=self.body, type_ignores=[])):
            if isinstance(node, ast.Name) and node.id == target and isinstance(node.ctx, ast.Load) and \
                    id(node) not in subscripts:
                raise error(f"Inductor's code uses the tuple {target} of {text} whole: {gives}")
        return {int(k): v for k, v in items.items() if k.isdigit()}

    @staticmethod
    def _given(call: ast.Call) -> tuple[str, dict, str]:
        """(the op, its arguments by name, the call's text); AttentionRefused where they are not the op's."""
        op = attention_op(ast.unparse(call.func))
        parameters, text = OPS[op], f"{ast.unparse(call)[:200]}"
        given = arguments_by_name(call, parameters, f"aten.{op}", AttentionRefused)
        if len(call.args) > len(parameters) or not {"query", "key", "value"} <= set(given):
            raise AttentionRefused(f"Inductor's {text} does not give aten.{op}'s query, key and value")
        return op, given, text

    def launch(self, target: str, call: ast.Call) -> ast.Call:
        """``flash_attention(...)`` for ``target = torch.ops.aten.<attention op>(...)``; AttentionRefused where the
        call asks for what flash_attention does not compute (a mask, dropout) or the code reads more of its tuple."""
        op, given, text = self._given(call)
        for name in MASKS:
            if name in given and ast.unparse(given[name]) != "None":
                raise AttentionRefused(f"Inductor's {text} passes an attention mask ({name}="
                                       f"{ast.unparse(given[name])}), which kernelevo's flash attention does not "
                                       f"compute (plain or causal attention only)")
        dropout = given.get("dropout_p")
        if dropout is not None and not (isinstance(dropout, ast.Constant) and dropout.value in (0, 0.0, False)):
            raise AttentionRefused(f"Inductor's {text} asks for dropout (dropout_p={ast.unparse(dropout)}), which "
                                   f"kernelevo's flash attention does not compute")
        items = self._items(target, text, OUTPUTS, "kernelevo's flash attention gives only the output [0] and the "
                                                    "logsumexp [1]")
        prefix = f"A{self.count}_"
        self.count += 1
        for param, value in self.defaults.items():
            self.constants.append((prefix + param, value))
            self.tunable[prefix + param] = sorted(set(self.choices.get(param, BLOCKS)) | {value})
        arguments = [ast.unparse(given[p]) for p in ("query", "key", "value")]
        arguments += [f"{p}={ast.unparse(given[p])}" for p in TAKEN[3:] if p in given]
        arguments += [f"{keyword}={self.layouts[items[i]]}" for i, keyword in enumerate(("out_stride", "lse_stride"))
                      if items.get(i) in self.layouts]
        arguments += [f"{keyword}={prefix}{param}" for param, keyword in LAUNCH.items()]
        return ast.parse(f"{LAUNCHER}({', '.join(arguments)})", mode="eval").body

    def library(self, target: str, call: ast.Call) -> ast.Tuple:
        """``(torch.nn.functional.scaled_dot_product_attention(...),)`` for ``target = torch.ops.aten.<attention
        op>(...)``: the library's attention as a candidate may call it (policy ``kernelbench``); SeedError where the
        code reads more of the op's tuple than the output."""
        _, given, text = self._given(call)
        self._items(target, text, 1, f"{PUBLIC} gives only the output [0]")
        mask = next((given[name] for name in MASKS if name in given), None)
        arguments = [ast.unparse(given[p]) for p in ("query", "key", "value")]
        arguments += [f"attn_mask={ast.unparse(mask)}"] if mask is not None else []
        arguments += [f"{p}={ast.unparse(given[p])}" for p in ("dropout_p", *TAKEN[3:]) if p in given]
        return ast.parse(f"({PUBLIC}({', '.join(arguments)}),)", mode="eval").body
