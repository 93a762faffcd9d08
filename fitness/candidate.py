"""Candidates: Python modules defining ``ModelNew``, loaded from source text inside the evaluation worker.

The source is written to a file (Triton's ``@jit`` reads a kernel's source from its file) under a module name
derived from its hash, which is also how launches of the candidate's own kernels are recognised.
"""
from __future__ import annotations

import importlib.util
import sys
import traceback
from pathlib import Path

import torch

from fitness.genome import short_hash

# Errors of the kernel's code rather than of its execution. Under the CPU interpreter, anything raised inside a
# kernel body arrives as InterpreterError: on a GPU the same code fails to compile (or faults, reported separately).
COMPILE_ERROR_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                       "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError", "NameError",
                       "InterpreterError"}


class CandidateError(Exception):
    """Loading or running a candidate failed; `status` says how (compile_error or runtime_error)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def source_hash(source: str) -> str:
    return short_hash(source)


def module_name_for(source: str) -> str:
    return f"kernelevo_candidate_{source_hash(source)}"


def describe_exception(exc: BaseException, candidate_file: str | None = None) -> str:
    """The exception's type and message, with only the traceback frames inside the candidate's file."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if candidate_file and f.filename == candidate_file]
    lines = [f"  line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in own[-5:]]
    head = f"{type(exc).__name__}: {exc}"
    return "\n".join(([f"{head}"] + (["candidate frames:"] + lines if lines else [])))


def classify_exception(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "compile_error" if names & COMPILE_ERROR_TYPES else "runtime_error"


def load_candidate(source: str, workdir: Path):
    """Import the candidate's source as a module; CandidateError when it does not import or has no ModelNew."""
    name = module_name_for(source)
    path = Path(workdir) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - anything the candidate raises at import is its own failure
        raise CandidateError("compile_error", "importing the candidate failed: "
                             + describe_exception(exc, str(path))) from exc
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise CandidateError("compile_error", "the candidate defines no class ModelNew "
                             "(it must define class ModelNew(nn.Module) with Model's constructor)")
    return module


def build_model(cls, init_inputs: list, seed: int, device: str):
    """Construct a model with a fixed seed directly on the device, in eval mode."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(*init_inputs)
    return model.to(device).eval()


def copy_parameters(reference, candidate) -> str:
    """Give the candidate the reference's parameters when their state_dicts line up; returns how they were made equal."""
    ref_state, new_state = reference.state_dict(), candidate.state_dict()
    same_layout = ref_state.keys() == new_state.keys() and all(
        ref_state[k].shape == new_state[k].shape for k in ref_state)
    if ref_state and same_layout:
        candidate.load_state_dict(ref_state)
        return "state_dict"
    return "seed" if ref_state or new_state else "none"
