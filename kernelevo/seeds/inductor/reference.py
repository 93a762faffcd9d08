"""The reference problem's parts an Inductor seed keeps (``convert.py``): its imports, its definitions and the
module-level helpers they read, ``Model``'s constructor as ``ModelNew``'s and ``forward``'s signature as written.
Imports ``core`` and ``kernelevo.seeds.inductor.errors`` only."""
from __future__ import annotations

import ast
import copy

from kernelevo.core import pyast
from kernelevo.seeds.inductor.errors import SeedError


def _module_names_read(definition: ast.FunctionDef | ast.ClassDef) -> set[str]:
    """The names `definition` reads that are not its own (arguments and names it assigns)."""
    names = [n for n in ast.walk(definition) if isinstance(n, ast.Name)]
    local = {a.arg for f in ast.walk(definition) if isinstance(f, ast.FunctionDef)
             for a in f.args.args + f.args.kwonlyargs} | {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return {n.id for n in names if isinstance(n.ctx, ast.Load)} - local


def model_parts(problem_source: str) -> tuple[list[ast.stmt], ast.ClassDef]:
    """The problem's top-level statements but Model and the input functions, and Model itself."""
    tree = pyast.parse(problem_source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise SeedError("the problem file defines no class Model")
    definitions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                   and n.name not in ("get_inputs", "get_init_inputs")]
    read = set().union(*map(_module_names_read, definitions))
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    kept, kept_names = [], set()
    for node in tree.body:  # imports and definitions; not sizes and statements using them (the seed's are baked in)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            # a constant the definitions read (level3/41: batch_size in Model's __init__), or a helper built from
            # other definitions (level3/29-30: to_2tuple = _ntuple(2)), never from a size or a statement using one
            uses = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if node.targets[0].id in read and not uses & (assigned - kept_names):
                kept.append(node)
                kept_names.add(node.targets[0].id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) or (node in definitions and node is not model):
            kept.append(node)
    return kept, model


def forward_arguments(model: ast.ClassDef) -> tuple[list[str], str]:
    """Model.forward's arguments after self, and its signature as written: with its defaults, so an argument
    get_inputs() does not give (level3/47_NetVlad's ``mask=None``, level3/48_Mamba2's ``initial_states=None``) is
    not required of the seed either."""
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None or forward.args.vararg or forward.args.kwonlyargs:
        raise SeedError("Model.forward must take named positional arguments only for an Inductor seed")
    arguments = copy.deepcopy(forward.args)
    for argument in arguments.args:
        argument.annotation = None  # an annotation may name what the seed does not import (typing's Optional)
    return [a.arg for a in forward.args.args[1:]], ast.unparse(arguments)


def model_with(model: ast.ClassDef, forward: ast.FunctionDef) -> ast.ClassDef:
    """ModelNew: Model's constructor and other methods (its docstring left out, ``super()`` bare) with `forward`."""
    methods = [n for n in model.body if not (isinstance(n, ast.FunctionDef) and n.name == "forward")
               and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    for node in ast.walk(ast.Module(body=methods, type_ignores=[])):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "super":
            node.args = []  # super(Model, self) -> super()
    return ast.ClassDef(name="ModelNew", bases=model.bases, keywords=[], body=[*methods, forward],
                        decorator_list=[])


def used_statements(header: list[ast.stmt], imports: list[str], rest: str) -> list[ast.stmt]:
    """The problem's top-level statements the seed keeps: its definitions, and those of its imports that the seed
    reads (level3/48's `from einops import rearrange`, used by Model.forward only, got the seed rejected by the
    static check) and that are not among the seed's own `imports`."""
    body = [n for n in header if not isinstance(n, (ast.Import, ast.ImportFrom))]
    read = {n.id for n in ast.walk(pyast.parse(rest + "\n" + ast.unparse(ast.Module(body=body, type_ignores=[]))))
            if isinstance(n, ast.Name)}
    return [n for n in header if n in body or (ast.unparse(n) not in imports and any(
        a.name == "*" or (a.asname or a.name.split(".")[0]) in read for a in n.names))]
