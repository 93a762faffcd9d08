"""The genome: an immutable description of one candidate kernel's code.

A genome is Triton source plus the launch-parameter space it declares and the values chosen from that space. The
space is a convention the source carries: a module-level ``TUNABLE`` dict of name -> list of choices,
each name also a module-level constant holding the default, e.g.::

    BLOCK_SIZE = 1024
    NUM_WARPS = 4
    TUNABLE = {"BLOCK_SIZE": [256, 512, 1024, 2048], "NUM_WARPS": [2, 4, 8]}

``render(params)`` writes chosen values into those constants, giving the exact source that is evaluated; its hash
(of the normalised code) is the evaluation key, so the same code is never evaluated twice in a run.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field, replace

from kernelevo.core import pyast
from kernelevo.core.errors import KernelevoError
from kernelevo.core.records import from_record

TUNABLE_NAME = "TUNABLE"


class GenomeError(KernelevoError):
    """The source does not follow the TUNABLE convention; the message says what to fix."""


def normalise(source: str) -> str:
    """Source with comments and formatting removed: two spellings of the same code normalise alike."""
    return ast.unparse(pyast.parse(source))


def short_hash(text: str) -> str:
    """The project's one hash: 16 hex digits of SHA-256 (evaluation keys, candidate module names, study names)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_hash(source: str) -> str:
    return short_hash(normalise(source))


def _module_assignments(tree: ast.Module) -> dict[str, ast.Assign]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
    return found


def declared_space(source: str) -> dict[str, list]:
    """The TUNABLE dict of a source (empty when it declares none); each key must be a module-level constant."""
    assignments = _module_assignments(pyast.parse(source))
    if TUNABLE_NAME not in assignments:
        return {}
    try:
        space = ast.literal_eval(assignments[TUNABLE_NAME].value)
    except ValueError as exc:
        raise GenomeError(f"{TUNABLE_NAME} must be a literal dict of name -> list of choices ({exc})") from exc
    if not isinstance(space, dict) or not all(isinstance(v, (list, tuple)) and v for v in space.values()):
        raise GenomeError(f"{TUNABLE_NAME} must map each name to a non-empty list of choices")
    missing = [k for k in space if k not in assignments]
    if missing:
        raise GenomeError(f"{TUNABLE_NAME} declares {missing} but the module defines no such constants; "
                          f"add e.g. `{missing[0]} = {space[missing[0]][0]!r}` at module level")
    return {k: list(v) for k, v in space.items()}


def module_constants(source: str, names) -> dict:
    """The literal values of module-level constants (the defaults of the declared parameters)."""
    assignments = _module_assignments(pyast.parse(source))
    values = {}
    for name in names:
        try:
            values[name] = ast.literal_eval(assignments[name].value)
        except (KeyError, ValueError) as exc:
            raise GenomeError(f"module-level constant {name} must be a literal value") from exc
    return values


def set_module_constants(source: str, values: dict) -> str:
    """Source with the given module-level constants (including TUNABLE) re-assigned, everything else as written."""
    tree = pyast.parse(source)
    assignments = _module_assignments(tree)
    lines = source.splitlines(keepends=True)
    for name in sorted(values, key=lambda n: -assignments[n].lineno):  # bottom-up keeps line numbers valid
        node = assignments[name]
        start, end = node.lineno - 1, node.end_lineno
        lines[start:end] = [f"{name} = {values[name]!r}\n"]
    return "".join(lines)


@dataclass(frozen=True)
class Genome:
    """What an operator makes and the tuner tunes: code, its declared space and the chosen values.

    Lineage (parents, operator, generation) belongs to the individual that carries the genome
    (``kernelevo.core.individual.Individual``), not to the genome: the same code may be reached by two paths.
    """

    source: str  # the kernel module, with its declared defaults
    space: dict = field(default_factory=dict)  # name -> choices
    params: dict = field(default_factory=dict)  # name -> chosen value (tuned)
    note: str = field(default="", compare=False)  # what the operator meant to do (an LLM plan); not identity

    @classmethod
    def from_source(cls, source: str, note: str = "") -> "Genome":
        space = declared_space(source)
        params = module_constants(source, space)
        outside = [f"{name} = {value!r} is not among its {TUNABLE_NAME} choices {space[name]}"
                   for name, value in params.items() if value not in space[name]]
        if outside:
            raise GenomeError("; ".join(outside) + " (each constant's value must be one of its choices)")
        return cls(source=source, space=space, params=params, note=note)

    @property
    def key(self) -> str:
        """Identity of the kernel: the evaluation key of the code with its chosen parameters."""
        return evaluation_key(self.rendered())

    @property
    def structure(self) -> str:
        """Hash of the code with the declared constants blanked: genomes that differ only in tuning share it."""
        blank = {name: None for name in self.space}
        blank[TUNABLE_NAME] = None
        return code_hash(set_module_constants(self.source, blank)) if self.space else code_hash(self.source)

    def rendered(self, params: dict | None = None) -> str:
        """The exact source evaluated: the chosen (or given) parameter values written into the constants."""
        values = {**self.params, **(params or {})}
        return set_module_constants(self.source, values) if values else self.source

    def with_params(self, params: dict) -> "Genome":
        return replace(self, params={**self.params, **params})

    def with_space(self, space: dict) -> "Genome":
        """A genome whose declared space (and so its source's TUNABLE) is replaced."""
        source = set_module_constants(self.source, {TUNABLE_NAME: {k: list(v) for k, v in space.items()}})
        params = {k: (self.params[k] if self.params.get(k) in space[k] else space[k][0]) for k in space}
        return replace(self, source=source, space={k: list(v) for k, v in space.items()}, params=params)

    def with_note(self, note: str) -> "Genome":
        return replace(self, note=note)

    def to_dict(self) -> dict:
        return {"source": self.source, "space": self.space, "params": self.params, "note": self.note}

    @classmethod
    def from_dict(cls, data: dict) -> "Genome":
        return from_record(cls, data, "a genome")


def evaluation_key(rendered_source: str) -> str:
    """The key an evaluation is stored under: the hash of the normalised rendered source."""
    return code_hash(rendered_source)
