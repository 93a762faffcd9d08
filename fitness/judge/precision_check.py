"""The precision a policy allows an fp32 problem's kernels, checked in their source where Triton's CPU interpreter
cannot check it by running them.

A policy's ``fp32_operands`` (``fitness.comparison.policy``) names the narrowest operands a kernel of an fp32 problem
may compute with: ``any`` (no rule: KernelBench's), ``tf32`` (TF32 dot products, no fp16 / bf16 / fp8 operands:
their range is not fp32's, and a tolerance of 1e-2 lets fp16 rounding through on a draw whose values stay in range)
or ``ieee`` (every ``tl.dot`` in IEEE fp32 as well: ``input_precision="ieee"`` or ``allow_tf32=False``, given as a
constant or a name bound to one; ``tl.dot``'s default is TF32 on a GPU, while the interpreter computes every dot
product in fp32, so a TF32 kernel passed there). Each finding names its line, like the static check's
(``fitness.judge.static_check``).
"""
from __future__ import annotations

import ast

from kernelevo.core import pyast
from fitness.judge.static_check import Finding

NARROW_DTYPES = {"triton.language.float16", "triton.language.bfloat16", "torch.float16", "torch.half",
                 "torch.bfloat16"}
NARROW_PREFIXES = ("triton.language.float8", "triton.language.fp8", "torch.float8")
NARROW_METHODS = {"half", "bfloat16"}  # x.half(): a cast to fp16 whatever x is
SCALED_DOT = "triton.language.dot_scaled"  # fp8 / fp4 operands by construction
DOT = "triton.language.dot"


def precision_findings(source: str, policy) -> list[Finding]:
    """The constructs of `source` that `policy`'s ``fp32_operands`` refuses in a kernel of an fp32 problem; an empty
    list under ``any``. Raises SyntaxError."""
    if policy.fp32_operands == "any":
        return []
    checker = _Operands(policy.fp32_operands, policy.name)
    checker.visit(pyast.parse(source))
    return sorted(set(checker.findings), key=lambda f: f.line)


class _Operands(ast.NodeVisitor):
    def __init__(self, rule: str, policy: str):
        self.rule, self.policy = rule, policy
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}
        self.constants: list[dict] = [{}]  # names bound to a constant, per scope (module, then each function)

    def report(self, node, message: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), message))

    def visit_Import(self, node):
        for alias in node.names:
            self.aliases[alias.asname or alias.name.split(".")[0]] = (alias.name if alias.asname
                                                                      else alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def visit_Module(self, node):
        self.constants[0] = _constants(node.body)
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        parameters = {a.arg: _UNKNOWN for a in arguments + [node.args.vararg, node.args.kwarg] if a is not None}
        self.constants.append({**parameters, **_constants(node.body)})  # a parameter is whatever the caller gives
        self.generic_visit(node)
        self.constants.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _dotted(self, node) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id], *reversed(parts)])

    def visit_Attribute(self, node):
        dotted = self._dotted(node)
        if dotted is not None:
            self._check_dtype(node, dotted)
        else:
            self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in self.aliases:
            self._check_dtype(node, self.aliases[node.id])

    def visit_Compare(self, node):
        """A dtype compared with (``x.dtype == torch.bfloat16``, ``in (torch.float16, ...)``) is no cast."""
        for operand in [node.left, *node.comparators]:
            for item in operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]:
                if not self._narrow(self._dotted(item) or ""):
                    self.visit(item)

    @staticmethod
    def _narrow(dotted: str) -> bool:
        return dotted in NARROW_DTYPES or dotted.startswith(NARROW_PREFIXES)

    def _check_dtype(self, node, dotted: str) -> None:
        if self._narrow(dotted) or dotted == SCALED_DOT:
            self.report(node, f"'{dotted}' is not allowed under policy '{self.policy}' for an fp32 problem "
                              f"(fp16 / bf16 / fp8 operands have neither fp32's range nor its precision; "
                              f"{self._allowed()})")

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in NARROW_METHODS and self._dotted(func) is None:
            self.report(node, f"'.{func.attr}()' is not allowed under policy '{self.policy}' for an fp32 problem "
                              f"(a cast to {'fp16' if func.attr == 'half' else 'bf16'}; {self._allowed()})")
        if self.rule == "ieee" and self._dotted(func) == DOT and not self._ieee(node):
            self.report(node, f"tl.dot without input_precision=\"ieee\" (or allow_tf32=False) is not allowed under "
                              f"policy '{self.policy}': its default is TF32, which the policy refuses (Triton's CPU "
                              f"interpreter computes it in fp32 and cannot tell); pass input_precision=\"ieee\"")
        self.generic_visit(node)

    def _ieee(self, call: ast.Call) -> bool:
        given = {k.arg: self._constant(k.value) for k in call.keywords if k.arg}
        return given.get("input_precision") == "ieee" or given.get("allow_tf32") is False

    def _constant(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            for scope in reversed(self.constants):
                if node.id in scope:
                    return None if scope[node.id] is _UNKNOWN else scope[node.id]
        return None

    def _allowed(self) -> str:
        return ("compute in fp32, dot products in IEEE fp32" if self.rule == "ieee"
                else "compute in fp32; TF32 dot products are allowed")


def _constants(body: list) -> dict:
    """The names a scope binds: to their constant where a statement of the scope's own binds it once, to a constant
    (``ALLOW_TF32 : tl.constexpr = False`` in Inductor's templates), else to _UNKNOWN (bound twice, in a nested block,
    to anything else)."""
    stores: dict = {}
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
    bound = dict.fromkeys(stores, _UNKNOWN)
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if stores[name] == 1 and isinstance(value, ast.Constant):
            bound[name] = value.value
    return bound


_UNKNOWN = object()
