"""Problem loader: KernelBench-format files (``Model``, ``get_inputs``, ``get_init_inputs``).

A problem is named either by a path to such a file (a KernelBench checkout works unchanged) or by the name of a
bundled problem (``fitness/suite/<name>/problem.py``, listed in ``fitness/suite/suite.yaml``). Module-level size
constants can be overridden. Size presets: ``full`` (the file's own sizes) and ``test`` (the CPU interpreter's: a
bundled problem's hand-picked ``test_sizes``; for a file, the shrink rule of ``fitness.problems.sizes``), sizes the user
set applied on top of either.

``ProblemSpec`` is the small, picklable description that travels to evaluation workers; ``load_problem`` turns it
into a ``LoadedProblem`` (the executed module) in whichever process needs it.
"""
from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import numbers
from pathlib import Path
from types import ModuleType

import yaml

# a problem as it travels and as it is loaded live in fitness.problems.problem_spec (below the shrink rule, which this
# module's resolve_problem applies and which reads loaded problems); imported from here, where problems are found and
# loaded
from fitness.problems.problem_spec import (LoadedProblem, ProblemError, ProblemSpec, call_get_init_inputs,  # noqa: F401
                                  call_get_inputs, size_constants)

SUITE_DIR = Path(str(importlib.resources.files("fitness") / "suite")).resolve()  # the bundled problems (data)
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
SIZE_PRESETS = ("full", "test")
INDUCTOR = "inductor"  # problem.seed value and seed maker: the Triton kernels torch.compile generates


def suite_manifest() -> dict:
    """Bundled problems: name -> {description, test_sizes}."""
    return yaml.safe_load((SUITE_DIR / "suite.yaml").read_text()) or {}


def suite_names() -> list[str]:
    return list(suite_manifest())


def resolve_problem(name_or_path: str, sizes: dict | None = None, size_preset: str = "full") -> ProblemSpec:
    """A ProblemSpec for a bundled problem name or a KernelBench-format file path, with size overrides."""
    if size_preset not in SIZE_PRESETS:
        raise ProblemError(f"unknown size preset {size_preset!r}; use one of {SIZE_PRESETS}")
    manifest = suite_manifest()
    name_or_path = str(name_or_path)
    if name_or_path in manifest:
        folder = SUITE_DIR / name_or_path
        preset = dict(manifest[name_or_path].get("test_sizes") or {}) if size_preset == "test" else {}
        return ProblemSpec(name=name_or_path, path=str(folder / "problem.py"), sizes={**preset, **(sizes or {})},
                           seed_path=str(folder / "seed.py"), size_preset=size_preset,
                           size_note=_note("test sizes of fitness/suite/suite.yaml" if preset else "", sizes))
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise ProblemError(
            f"unknown problem {name_or_path!r}: it is neither a bundled problem ({', '.join(manifest)}) nor an "
            f"existing file; pass a bundled name or the path of a KernelBench-format .py file"
        )
    spec = ProblemSpec(name=path.stem, path=str(path.resolve()), sizes=dict(sizes or {}), size_preset=size_preset,
                       size_note=_note("", sizes))
    if size_preset != "test":
        return spec
    from fitness.problems.sizes import shrink_sizes

    shrunk = shrink_sizes(load_problem(spec), spec.sizes)
    return ProblemSpec(spec.name, spec.path, shrunk.sizes, size_preset=size_preset,
                       size_note=_note(shrunk.describe(), sizes))


def _note(source: str, given: dict | None) -> str:
    """Where the sizes come from: the preset's source, and the ones the user set."""
    yours = ", ".join(f"{k}={v}" for k, v in (given or {}).items())
    return "; ".join(filter(None, [source, f"set by you: {yours}" if yours else ""]))


def _execute_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the message must name the file, whatever went wrong inside it
        raise ProblemError(f"{path}: executing the problem file failed: {type(exc).__name__}: {exc}") from exc
    return module


def _apply_sizes(module: ModuleType, sizes: dict, path: Path) -> None:
    constants = size_constants(module)
    for key, value in sizes.items():
        if key not in constants:
            raise ProblemError(
                f"{path}: size override {key!r} is not a module-level numeric constant (or list of numbers) of "
                f"this problem; "
                f"overridable constants: {sorted(constants) or 'none'}"
            )
        if isinstance(constants[key], (list, tuple)) != isinstance(value, (list, tuple)):
            raise ProblemError(f"{path}: size override {key}={value!r}: the file's {key} is {constants[key]!r}; give "
                               f"a {'list' if isinstance(constants[key], (list, tuple)) else 'number'} like it")
        setattr(module, key, _size_value(path, key, constants[key], value))


def _size_value(path: Path, key: str, current, value):
    """`value` as the type of the file's `current` value of `key` (a list's items as its first); a ProblemError where
    it is not a number of that kind (``batch_size=abc``; ``2.5`` for a whole number)."""
    if isinstance(current, (list, tuple)):
        return type(current)(_size_value(path, key, current[0], v) for v in value)
    whole = isinstance(current, numbers.Integral)
    number = isinstance(value, numbers.Number) and not isinstance(value, bool)
    if not number or whole and not float(value).is_integer():  # 2.5, inf, nan for a whole number
        kind = "a whole number" if whole else "a number"
        raise ProblemError(f"{path}: size override {key}={value!r}: the file's {key} is {current!r}; give {kind} "
                           f"like it (e.g. problem.sizes.{key}={current!r})")
    return type(current)(value)


def load_problem(spec: ProblemSpec) -> LoadedProblem:
    """Execute the problem file, check it defines the three KernelBench names, and apply the size overrides."""
    path = Path(spec.path)
    if not path.is_file():
        raise ProblemError(f"{path}: problem file not found")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    module = _execute_file(path, f"kernelevo_problem_{path.stem}_{digest}")
    missing = [n for n in REQUIRED_NAMES if not hasattr(module, n)]
    if missing:
        raise ProblemError(
            f"{path}: not a KernelBench-format problem, it does not define {', '.join(missing)} "
            f"(a problem file needs class Model(nn.Module), get_inputs() and get_init_inputs())"
        )
    _apply_sizes(module, spec.sizes, path)
    return LoadedProblem(spec=spec, module=module)


ARGUMENT_TYPES = "tensors or plain numbers"  # what get_inputs() may return (``check_reference``)


def check_reference(problem: LoadedProblem, run_forward: bool) -> None:
    """The problem itself checked once, before any candidate is judged: get_inputs() returns a list of tensors or
    plain numbers, as many as Model.forward takes, and (`run_forward`: at the interpreter's test sizes) the reference
    Model builds and its forward returns a tensor or a tuple of them. A ProblemError names the file and what is
    wrong, so no candidate is blamed for the problem's fault. Without `run_forward` (a GPU, full sizes) the inputs
    are made on the meta device: no memory, no values."""
    import torch

    with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
        torch.manual_seed(0)
        _check_reference(problem, run_forward)


def _check_reference(problem: LoadedProblem, run_forward: bool) -> None:
    import inspect

    import torch

    path = problem.spec.path
    with torch.device("cpu" if run_forward else "meta"):
        inputs = call_get_inputs(problem)
        init_inputs = call_get_init_inputs(problem)
        model = _reference(problem, init_inputs) if run_forward else None
    odd = [f"item {i + 1} is a {type(x).__name__}" for i, x in enumerate(inputs)
           if not isinstance(x, (torch.Tensor, numbers.Number, type(None)))]
    if odd:
        raise ProblemError(f"{path}: get_inputs() must return {ARGUMENT_TYPES} (Model.forward's arguments), but "
                           f"{'; '.join(odd)}")
    empty = [f"item {i + 1} has shape {list(x.shape)}" for i, x in enumerate(inputs)
             if isinstance(x, torch.Tensor) and x.numel() == 0]
    if empty:
        raise ProblemError(f"{path}: get_inputs() returns an empty tensor ({'; '.join(empty)}): a size is 0; give "
                           f"every size of the inputs at least 1 (problem.sizes.NAME=N)")
    try:
        inspect.signature(problem.Model.forward).bind(None, *inputs)
    except TypeError as exc:
        raise ProblemError(f"{path}: get_inputs() returns {len(inputs)} argument(s) but Model.forward does not take "
                           f"them ({exc}); make get_inputs() return one item per forward argument") from exc
    except ValueError:  # a forward without a Python signature: its call below says what is wrong
        pass
    if model is None:
        return
    try:
        with torch.no_grad():
            output = model(*inputs)
    except Exception as exc:
        raise ProblemError(f"{path}: the reference Model.forward failed on get_inputs(): {type(exc).__name__}: "
                           f"{exc}; fix the problem file (no candidate can match a reference that fails)") from exc
    outputs = list(output) if isinstance(output, (list, tuple)) else [output]
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        raise ProblemError(f"{path}: the reference Model.forward returned {type(output).__name__}; it must return "
                           f"a tensor or a tuple of tensors")


def _reference(problem: LoadedProblem, init_inputs: list):
    """The reference Model built from get_init_inputs(), in eval mode; a ProblemError naming the file if it fails."""
    try:
        return problem.Model(*init_inputs).eval()
    except Exception as exc:
        raise ProblemError(f"{problem.spec.path}: constructing the reference Model(*get_init_inputs()) failed: "
                           f"{type(exc).__name__}: {exc}") from exc
