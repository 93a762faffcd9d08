"""KnobMutation: change a launch/tiling knob that the source hard-codes instead of declaring.

Seeds (and LLM rewrites) often leave knobs out of TUNABLE: a literal ``num_warps=4`` / ``num_stages=3`` in a launch
or ``triton.Config`` call, or an UPPER_CASE module constant such as ``GROUP_M = 8``. The tuner cannot touch those,
so this operator does: it halves or doubles one (within ``hardware_profiles.limits.BOUNDS``). A module constant is also
declared, added to TUNABLE with choices [v/2, v, 2v] (those in bounds) and the new value chosen, so from then on
the tuner explores it too; a call literal is rewritten in place in the source text.
"""
from __future__ import annotations

import ast
import io
import random
import re
from dataclasses import dataclass, replace
from typing import ClassVar

from kernelevo.core import pyast
from kernelevo.core.genome import TUNABLE_NAME, Genome
from hardware_profiles import HardwareProfile
from kernelevo.core.individual import Individual
from operators.base import Operator, OperatorContext, halved_and_doubled, is_int

CALL_KNOBS = ("num_warps", "num_stages")  # keyword arguments of kernel launches and triton.Config
CONSTANT_NAME = re.compile(r"[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Knob:
    """One undeclared integer knob: a call keyword literal (``node`` set) or a module constant (``node`` None)."""

    name: str
    value: int
    node: ast.Constant | None = None  # the literal, for call keywords


def call_literal_knobs(tree: ast.Module) -> list[Knob]:
    """``num_warps=<int>`` / ``num_stages=<int>`` literals in calls, in source order."""
    knobs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg in CALL_KNOBS and isinstance(value, ast.Constant) and is_int(value.value):
                    knobs.append(Knob(keyword.arg, value.value, value))
    return sorted(knobs, key=lambda k: (k.node.lineno, k.node.col_offset))


def module_assignments(tree: ast.Module) -> dict[str, ast.Assign]:
    """Module-level ``NAME = value`` statements by name (a later one wins, as in ``kernelevo.core.genome``)."""
    return {node.targets[0].id: node for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def constant_knobs(tree: ast.Module, declared: dict) -> list[Knob]:
    """UPPER_CASE module-level ``NAME = <int>`` constants that TUNABLE does not declare."""
    return [Knob(name, node.value.value) for name, node in module_assignments(tree).items()
            if CONSTANT_NAME.fullmatch(name) and name != TUNABLE_NAME and name not in declared
            and isinstance(node.value, ast.Constant) and is_int(node.value.value)]


def replace_literal(source: str, node: ast.Constant, value: int) -> str:
    """Source with exactly the text of one single-line literal replaced (ast columns are UTF-8 byte offsets)."""
    lines = io.StringIO(source, newline="").readlines()  # split where the tokenizer does, endings untouched
    line = lines[node.lineno - 1].encode()
    lines[node.lineno - 1] = (line[:node.col_offset] + str(value).encode() + line[node.end_col_offset:]).decode()
    return "".join(lines)


def with_tunable(source: str, after: str) -> str:
    """Source guaranteed to have a TUNABLE assignment (an empty one is added after constant ``after``)."""
    assigned = module_assignments(pyast.parse(source))
    if TUNABLE_NAME in assigned:
        return source
    lines = io.StringIO(source, newline="").readlines()
    end = assigned[after].end_lineno
    if end and not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    lines.insert(end, f"{TUNABLE_NAME} = {{}}\n")
    return "".join(lines)


def rewrite_call_literal(parent: Genome, knob: Knob, value: int) -> Genome:
    return replace(parent, source=replace_literal(parent.source, knob.node, value))


def declare_constant(parent: Genome, knob: Knob, value: int, profile: HardwareProfile | None) -> Genome:
    choices = sorted({knob.value, *halved_and_doubled(knob.name, knob.value, profile)})
    declarable = replace(parent, source=with_tunable(parent.source, knob.name))
    return declarable.with_space({**parent.space, knob.name: choices}).with_params({knob.name: value})


@dataclass(frozen=True, kw_only=True)
class KnobMutation(Operator):
    """Halve or double one undeclared knob (call literal num_warps/num_stages or UPPER_CASE int constant)."""

    name: ClassVar[str] = "knob_mutation"
    arity: ClassVar[int] = 1

    def __call__(self, parents: list[Individual], rng: random.Random, context: OperatorContext) -> list[Genome]:
        (parent,) = self.check_arity(parents)
        tree = pyast.parse(parent.source)
        knobs = call_literal_knobs(tree) + constant_knobs(tree, parent.space)
        options = [(knob, moves) for knob in knobs
                   if (moves := halved_and_doubled(knob.name, knob.value, context.profile))]
        if not options:
            return []
        knob, moves = rng.choice(options)
        value = rng.choice(moves)
        if knob.node is not None:
            child = rewrite_call_literal(parent, knob, value)
        else:
            child = declare_constant(parent, knob, value, context.profile)
        return self.offspring(child, parents)
