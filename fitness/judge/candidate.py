"""Candidates: Python modules defining ``ModelNew``, loaded from source text inside the evaluation worker.

The source is written to a file (Triton's ``@jit`` reads a kernel's source from its file) under a module name
derived from its hash, which is also how launches of the candidate's own kernels are recognised.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import traceback
from pathlib import Path

import torch

from kernelevo.core.genome import short_hash
from kernelevo.core.evaluation_record import Status

# Errors of the kernel's code rather than of its execution. Under the CPU interpreter, anything raised inside a
# kernel body arrives as InterpreterError: on a GPU the same code fails to compile (or faults, reported separately).
COMPILE_ERROR_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct",
                       "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError", "NameError",
                       "InterpreterError"}


class CandidateError(Exception):
    """Loading or running a candidate failed; `status` says how (compile_error or runtime_error)."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = Status.of(status, "a candidate's failure")
        self.reason = reason


def source_hash(source: str) -> str:
    return short_hash(source)


def module_name_for(source: str) -> str:
    return f"kernelevo_candidate_{source_hash(source)}"


def describe_exception(exc: BaseException, candidate_file: str | None = None) -> str:
    """The exception's type and message, the line of the candidate's source where it failed, and the traceback
    frames inside the candidate's file.

    The failing line is found where the launch line alone would hide it: under Triton's interpreter, an error in
    a kernel body is re-raised at the launch (InterpreterError) with the kernel's own frame in its cause; a Triton
    compile error (CompilationError) names a line counted from its kernel's ``def`` (``at 4:8:``), which is mapped
    to the line of the candidate's file."""
    chain = _exception_chain(exc)
    frames = []
    for link in chain:
        for frame in traceback.extract_tb(link.__traceback__):
            if candidate_file and frame.filename == candidate_file and \
                    (frame.lineno, frame.name) not in [(f.lineno, f.name) for f in frames]:
                frames.append(frame)
    failing = _compile_error_line(chain, candidate_file) or _innermost_frame_line(chain, candidate_file)
    lines = [f"  line {f.lineno}, in {f.name}: {(f.line or '').strip()}" for f in frames[-5:]]
    head = [f"{type(exc).__name__}: {exc}"] + ([failing] if failing else [])
    return "\n".join(head + (["candidate frames:"] + lines if lines else []))


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception and what caused it, outermost first."""
    chain = []
    while exc is not None and all(exc is not seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return chain


def _innermost_frame_line(chain: list[BaseException], candidate_file: str | None) -> str:
    """"failing line N, in f: code" for the deepest frame in the candidate's file (a kernel body under the
    interpreter), or "" when no frame is the candidate's."""
    for link in reversed(chain):
        own = [f for f in traceback.extract_tb(link.__traceback__) if candidate_file and f.filename == candidate_file]
        if own:
            return f"failing line {own[-1].lineno}, in {own[-1].name}: {(own[-1].line or '').strip()}"
    return ""


def _compile_error_line(chain: list[BaseException], candidate_file: str | None) -> str:
    """The candidate's line of the innermost Triton CompilationError: its node's line counts from the kernel's
    ``def`` line (``src`` is the kernel's source from ``def`` on)."""
    for link in reversed(chain):
        src, node = getattr(link, "src", None), getattr(link, "node", None)
        if not isinstance(src, str) or not isinstance(getattr(node, "lineno", None), int) or not candidate_file:
            continue
        name = re.match(r"\s*def\s+(\w+)", src)
        try:
            source = Path(candidate_file).read_text()
            tree = ast.parse(source)
        except (OSError, SyntaxError):
            return ""
        defs = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and name and n.name == name[1]]
        if len(defs) != 1:
            return ""
        number = defs[0] + node.lineno - 1
        code = source.splitlines()[number - 1].strip() if number <= len(source.splitlines()) else ""
        return f"failing line {number} (line {node.lineno} of kernel {name[1]}), in {name[1]}: {code}"
    return ""


def classify_exception(exc: BaseException) -> Status:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return Status.COMPILE_ERROR if names & COMPILE_ERROR_TYPES else Status.RUNTIME_ERROR


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
    """Give the candidate the reference's parameters when their state_dicts line up; returns how they were made equal.
    The candidate's ``load_state_dict`` (its own, maybe overridden) gets copies: never a tensor of the reference's."""
    ref_state, new_state = reference.state_dict(), candidate.state_dict()
    same_layout = ref_state.keys() == new_state.keys() and all(
        ref_state[k].shape == new_state[k].shape for k in ref_state)
    if ref_state and same_layout:
        candidate.load_state_dict({k: v.detach().clone() for k, v in ref_state.items()})
        return "state_dict"
    return "seed" if ref_state or new_state else "none"


_OOM = re.compile(r"Tried to allocate ([\d.]+) ([KMG]i?B)\. GPU \d+ has a total capacity of ([\d.]+) ([KMG]i?B).*?"
                  r"this process has ([\d.]+) ([KMG]i?B) memory in use", re.S)
_UNITS = {"KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9}
CROWDED_SHARE = 0.97  # a job that held and asked for less than this share of a GPU alone was crowded out by others


def crowded_out(reason: str) -> str:
    """Why a CUDA out-of-memory error in `reason` is not the job's own doing ('' when it may be): torch's message
    says what the job asked for and what its process held; when those together fit in CROWDED_SHARE of the GPU,
    other processes held the rest. No verdict either way: such a job is run again, never counted a pass
    (docs/measurements.md)."""
    found = _OOM.search(reason)
    if not found:
        return ""
    asked, total, held = (float(found.group(i)) * _UNITS[found.group(i + 1)] for i in (1, 3, 5))
    if asked + held > CROWDED_SHARE * total:
        return ""
    return (f"the GPU's memory was held by other processes (this job held {held / 2 ** 30:.1f} GiB of "
            f"{total / 2 ** 30:.1f} GiB and asked for {asked / 2 ** 30:.1f} GiB more): no verdict on the kernel")
