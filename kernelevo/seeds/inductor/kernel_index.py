"""Inductor's index arithmetic evaluated on tensors: the primitives with which ``epilogues.py`` and
``reductions.py`` check that a kernel after a convolution reads the convolution's buffer at the element a tile of
kernelevo's convolution holds (``Refused`` when it does not, with the reason)."""
from __future__ import annotations

import ast
import math

import torch

SAMPLES = 4096


class Refused(Exception):
    """Why a kernel after a convolution stays a launch of its own."""


def literal(node: ast.AST | None):
    try:
        return ast.literal_eval(node) if node is not None else None
    except (ValueError, SyntaxError):
        return None


def names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def offsets(sizes: tuple, strides: tuple, coords: torch.Tensor) -> torch.Tensor:
    return (coords * torch.tensor(strides, dtype=torch.int64)).sum(1)


def coordinates(sizes: tuple) -> torch.Tensor:
    """Every element's coordinates of a small tensor, else the corners and SAMPLES drawn (a fixed generator)."""
    numel = math.prod(sizes)
    if numel <= SAMPLES * 4:
        index = torch.arange(numel)
    else:
        drawn = torch.randint(0, numel, (SAMPLES,), generator=torch.Generator().manual_seed(0))
        index = torch.cat([torch.arange(8), numel - 1 - torch.arange(8), drawn])
    coords = []
    for size in reversed(sizes):
        coords.append(index % size)
        index = index // size
    return torch.stack(coords[::-1], 1)


def evaluate(node: ast.AST, env: dict):
    """An index expression of Inductor's kernel on int64 tensors (plain integer arithmetic only)."""
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand, env)
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod):
        left, right = evaluate(node.left, env), evaluate(node.right, env)
        return {ast.Add: lambda: left + right, ast.Sub: lambda: left - right, ast.Mult: lambda: left * right,
                ast.FloorDiv: lambda: left // right, ast.Mod: lambda: left % right}[type(node.op)]()
    raise Refused(f"its index {ast.unparse(node)} is not plain integer arithmetic")


def address(call: ast.Call, pointer: str) -> ast.AST:
    """The index `call` (tl.load / tl.store) reads or writes at from `pointer` (``pointer + (index)``)."""
    where = call.args[0] if call.args else None
    if isinstance(where, ast.Name) and where.id == pointer:
        return ast.Constant(0)
    if isinstance(where, ast.BinOp) and isinstance(where.op, ast.Add) and isinstance(where.left, ast.Name) and \
            where.left.id == pointer:
        return where.right
    raise Refused(f"it addresses {pointer} as {ast.unparse(where) if where else '?'}")
