"""Random numbers a problem's forward draws (KernelBench level3/35_LSTM's ``torch.randn`` initial state), in a seed.

Inductor normally lowers ``torch.randn`` to its own Philox random numbers in Triton, seeded by a call of
``aten.randint.low_out``: other numbers than eager's, so no seed made of them could match the reference. The capture
sets ``torch._inductor.config.fallback_random`` (``capture.py``), and Inductor then calls ATen's own random functions
(``torch.ops.aten.randn.default([6, 10, 32], device=device(type='cuda', index=0), pin_memory=False)``), which draw
what eager draws from torch's generator. The converter writes each such call as the torch function it is
(``torch.randn([6, 10, 32], device=<the inputs' device>)``); the judge seeds torch's generator alike before the
reference's and the candidate's forward and allows a candidate exactly the draws the reference makes
(``fitness.judge.randomness``). Any other ATen call stays the converter's error, Inductor's Philox seed call included.
"""
from __future__ import annotations

import ast

from kernelevo.seeds.inductor.errors import OTHER_SEEDS, SeedError, arguments_by_name

# ATen's random creation functions: overload -> (the torch function, its positional parameters)
DRAWS = {"aten.randn.default": ("torch.randn", ["size"]), "aten.rand.default": ("torch.rand", ["size"]),
         "aten.randint.default": ("torch.randint", ["high", "size"]),
         "aten.randint.low": ("torch.randint", ["low", "high", "size"]),
         "aten.normal.float_float": ("torch.normal", ["mean", "std", "size"]),
         "aten.randperm.default": ("torch.randperm", ["n"])}
KEPT = ("dtype",)  # keywords written as Inductor gives them; the device becomes the inputs'; layout and pin_memory
DROPPED = ("layout", "pin_memory")  # are the defaults of a tensor on the device
TORCH_DRAWS = frozenset(function for function, _ in DRAWS.values())  # what a seed may call (not a library kernel)
PHILOX_SEEDS = "aten.randint.low_out"  # Inductor's own random numbers: their seeds, drawn once per call
NOTE = (" forward draws random numbers as the problem's does, with the same torch functions (the judge seeds torch's "
        "generator alike for the reference and the candidate).")


def aten_name(name: str) -> str:
    """``torch.ops.aten.randn.default`` -> ``aten.randn.default``."""
    return name[len("torch.ops."):] if name.startswith("torch.ops.") else name


def is_draw(name: str) -> bool:
    return aten_name(name) in DRAWS


def draws_in(forward: ast.FunctionDef) -> bool:
    """The seed's forward draws random numbers (its calls of ``TORCH_DRAWS``)."""
    return any(isinstance(n, ast.Call) and ast.unparse(n.func) in TORCH_DRAWS for n in ast.walk(forward))


def torch_draw(call: ast.Call, device_expr: str) -> ast.Call:
    """Inductor's call of an ATen random function as the torch function, on the inputs' device."""
    name = aten_name(ast.unparse(call.func))
    function, positional = DRAWS[name]
    given = arguments_by_name(call, positional + ["generator", *KEPT, "device", *DROPPED], name)
    if "generator" in given and not (isinstance(given["generator"], ast.Constant) and given["generator"].value is None):
        raise SeedError(f"Inductor's {ast.unparse(call)[:200]} draws from a generator of its own; {OTHER_SEEDS}")
    arguments = [ast.unparse(given[p]) for p in positional if p in given]
    arguments += [f"{k}={ast.unparse(given[k])}" for k in KEPT if k in given] + [f"device={device_expr}"]
    return ast.parse(f"{function}({', '.join(arguments)})", mode="eval").body


def refused(name: str) -> str:
    """Why the converter refuses an ATen call `name` ('' when it says nothing more than its name)."""
    if aten_name(name).startswith(PHILOX_SEEDS):
        return (" (its random seeds: forward draws random numbers, and this capture has Inductor's own Philox numbers "
                "for them: it was made without torch._inductor.config.fallback_random, which the capture sets now "
                "so that Inductor calls torch's random functions)")
    return ""


def stale(captured: dict) -> str:
    """Why a cached capture cannot make a seed any more ('' when it can): made before the capture set
    fallback_random, its code draws Inductor's own random numbers."""
    return STALE if PHILOX_SEEDS in captured.get("code", "") else ""


STALE = "its cached capture has Inductor's own random numbers (made before fallback_random)"
