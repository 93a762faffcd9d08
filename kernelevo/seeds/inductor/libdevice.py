"""A seed's ``libdevice`` calls on Triton's interpreter, which runs none of them: each ``libdevice.NAME(...)`` becomes
``cpu_NAME(...)``, the CPU form of ``kernelevo/seeds/kernels/libdevice_cpu.py`` (or ``libdevice_bessel.py``) that the
seed then holds a copy of (with the forms it calls); a call with no form there is a SeedError naming the function."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

from kernelevo.core import pyast
from kernelevo.seeds.inductor.errors import OTHER_SEEDS, SeedError

FORMS_FILES = [Path(__file__).resolve().parents[1] / "kernels" / name for name in ("libdevice_cpu.py",
                                                                                   "libdevice_bessel.py")]
PREFIX = "cpu_"
# Inductor's jit helpers that call libdevice inside torch (the interpreter cannot run them either): their CPU form,
# or None where there is none
HELPERS = {"exp": "tl.exp({0})", "frexp": None}


@functools.cache
def forms() -> dict[str, ast.FunctionDef]:
    """The CPU forms and the helpers they call, by function name, in the files' order."""
    return {n.name: n for path in FORMS_FILES for n in pyast.parse(path.read_text()).body
            if isinstance(n, ast.FunctionDef)}


class _ForInterpreter(ast.NodeTransformer):
    def __init__(self, where: str):
        self.where = where

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            return node
        if func.value.id == "libdevice":
            if PREFIX + func.attr not in forms():
                raise SeedError(f"{self.where} calls libdevice.{func.attr}, which Triton's interpreter cannot run and "
                                f"kernelevo has no CPU form of (kernelevo/seeds/kernels/libdevice_*.py); {OTHER_SEEDS}")
            node.func = ast.Name(id=PREFIX + func.attr, ctx=ast.Load())
        elif func.value.id == "triton_helpers" and func.attr in HELPERS:
            if HELPERS[func.attr] is None:
                raise SeedError(f"{self.where} calls triton_helpers.{func.attr}, which calls libdevice, which Triton's "
                                f"interpreter cannot run; {OTHER_SEEDS}")
            return ast.parse(HELPERS[func.attr].format(ast.unparse(node.args[0])), mode="eval").body
        return node


def for_interpreter(function: ast.FunctionDef) -> ast.FunctionDef:
    """`function` (a kernel or a jit helper of Inductor's) with its libdevice calls as calls of their CPU forms."""
    return _ForInterpreter(f"kernel {function.name}").visit(function)


def forms_called(functions: list[ast.FunctionDef]) -> dict[str, ast.FunctionDef]:
    """The CPU forms `functions` call, with those they call in turn, in the files' order (each before its caller)."""
    wanted, todo = set(), [*functions]
    while todo:
        for node in ast.walk(todo.pop()):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in forms() \
                    and node.func.id not in wanted:
                wanted.add(node.func.id)
                todo.append(forms()[node.func.id])
    return {name: function for name, function in forms().items() if name in wanted}
