"""The converter's error, the ways out it names, and the check of a library call's arguments that raises it."""
from __future__ import annotations

import ast

from kernelevo.core.errors import KernelevoError

OTHER_SEEDS = "pass a seed file (problem.seed=PATH) or let an LLM write one (llm=... llm.initialise=true)"


class SeedError(KernelevoError):
    """Inductor's output uses something the converter does not handle; the message says what and the way out."""


def arguments_by_name(call, parameters: list[str], op: str, error: type = SeedError) -> dict:
    """A library call's arguments in Inductor's code by the op's parameter names (positional, then keywords); `error`
    naming the op where a keyword is not one of its parameters or gives one twice."""
    given = dict(zip(parameters, call.args))
    for keyword in call.keywords:
        if keyword.arg not in parameters or keyword.arg in given:
            raise error(f"Inductor's {ast.unparse(call)[:200]} passes {keyword.arg or '**'}, which is not an argument "
                        f"of {op} {tuple(parameters)} (or passes it twice)")
        given[keyword.arg] = keyword.value
    return given
