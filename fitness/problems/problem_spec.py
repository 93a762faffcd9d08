"""A problem as it travels to evaluation workers (``ProblemSpec``: small, picklable) and as it is loaded in the
process that needs it (``LoadedProblem``: the executed module), its size constants, and its two calls with their
failures named. Found and loaded by ``fitness.problems.problem``; the shrink rule (``fitness.problems.sizes``) and the
cost model (``fitness.problems.speed_of_light``) read loaded problems from here, so that the loader may apply the shrink
rule without a cycle."""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kernelevo.core.errors import KernelevoError
from kernelevo.core.records import from_record


class ProblemError(KernelevoError):
    """A problem file or its size overrides cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class ProblemSpec:
    name: str
    path: str
    sizes: dict = field(default_factory=dict)
    seed_path: str | None = None
    size_preset: str = "full"
    size_note: str = ""  # where the sizes come from, for people (the start line)

    def to_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "sizes": dict(self.sizes), "seed_path": self.seed_path,
                "size_preset": self.size_preset, "size_note": self.size_note}

    @classmethod
    def from_dict(cls, data: dict) -> "ProblemSpec":
        return from_record(cls, data, "a problem's record")

    def seed_source(self) -> str:
        if self.seed_path is None:
            raise ProblemError(f"problem {self.name!r} has no seed kernel of its own (only bundled problems have one)")
        return Path(self.seed_path).read_text()


@dataclass
class LoadedProblem:
    spec: ProblemSpec
    module: ModuleType

    @property
    def Model(self):
        return self.module.Model

    def get_inputs(self) -> list:
        return list(self.module.get_inputs())

    def get_init_inputs(self) -> list:
        return list(self.module.get_init_inputs())

    @property
    def sizes(self) -> dict:
        """The problem's size constants as loaded (overrides applied)."""
        return size_constants(self.module)


def _number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def size_constants(module: ModuleType) -> dict:
    """The module-level numeric constants of a problem file, and its lists and tuples of numbers (level3/1_MLP's
    ``layer_sizes = [16384, 16384]``): its sizes (what size overrides may change)."""
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and (
        _number(v) or isinstance(v, (list, tuple)) and v and all(_number(x) for x in v))}


def call_get_inputs(problem: LoadedProblem) -> list:
    """get_inputs(), with any failure reported as a ProblemError naming the file: it must return a list (or tuple)
    of the forward's arguments, not one tensor (whose rows would become the arguments)."""
    try:
        inputs = problem.module.get_inputs()
    except Exception as exc:
        raise ProblemError(f"{problem.spec.path}: get_inputs() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(inputs, (list, tuple)):
        raise ProblemError(f"{problem.spec.path}: get_inputs() returned a {type(inputs).__name__}; it must return "
                           f"a list of Model.forward's arguments, e.g. [torch.randn(...)]")
    return list(inputs)


def call_get_init_inputs(problem: LoadedProblem) -> list:
    try:
        return problem.get_init_inputs()
    except Exception as exc:
        raise ProblemError(f"{problem.spec.path}: get_init_inputs() failed: {type(exc).__name__}: {exc}") from exc
