"""The judge's state, captured before a candidate's code runs and verified after each stretch of it.

A candidate runs in the worker's interpreter, beside the judge: the reference, the output comparison, the timer and
the guards. Whatever path it finds (the static check is a filter, not the boundary), a patch of the judge lives in
interpreter state: a function, method or class rebound, a module swapped in ``sys.modules``, a global added to
shadow a builtin, a torch function or dispatch mode left on, a trace function, a Python thread left running,
changed precision flags. ``JudgeState.capture()`` records that state -- object identities, not values -- right
before the candidate is imported; ``verify()`` names every difference. The worker verifies after the import, after
the model is built, after the compile pass, after every correctness call (before its output is compared) and after
timing, and rejects the candidate on any difference.

A patch made inside one call and undone before the call returns is not seen, and changes nothing the judge does:
the judge never runs inside a candidate call, and the primitives it calls *between* timed calls (clocks, CUDA
events, synchronisation, the L2 flush) are bound by ``fitness.measure.timing`` before candidate code exists.

What is watched: every module of kernelevo's evaluator (``fitness.*``, and ``core.*``: the data model it imports)
and the classes defined there, strictly (every attribute, no attribute added); ``builtins`` strictly; the functions,
classes and submodules of every module the evaluator's code names (``json``, ``os``, ``statistics``,
``dataclasses``, ...) and of ``time``, ``math``, ``torch``, ``torch.nn.functional``, ``torch.linalg`` and
``torch.cuda`` (attributes added there are tolerated: torch imports submodules lazily); the class dictionaries of
``torch.Tensor``, ``torch.nn.Module``, ``torch.cuda.Event`` and Triton's kernel classes (which the launch counter
wraps), strictly; torch's global ``nn.Module`` hook registries (a hook there runs inside the reference: it could make
the reference return the candidate's output); and, once it is built (``JudgeState.watch``), the reference's
parameters: the same tensors holding the same bytes.
"""
from __future__ import annotations

import sys
import types

import torch

from fitness.judge.checks import Verdict

# the judge, and the data model it imports (kernelevo.core.genome hashes candidates)
OWN_PACKAGES = ("fitness", "kernelevo.core")
STRICT_MODULES = ("builtins",)
LOOSE_MODULES = ("time", "math", "torch", "torch.nn.functional", "torch.linalg", "torch.cuda")
MAX_NAMED = 4  # differences named in a verdict
# Python's own bookkeeping, added to a module's globals by a warning attributed to its code (a torch warning raised
# under the judge's TF32 emulation, fitness.judge.tf32, must not reject an honest kernel: docs/measurements.md)
BOOKKEEPING = frozenset({"__warningregistry__"})

_current_frames = sys._current_frames  # bound now: verify() must not call what a candidate could rebind
_modules = sys.modules
_gettrace, _getprofile = sys.gettrace, sys.getprofile


def _watched_classes() -> list:
    from fitness.judge.guards import LaunchCounter

    classes = [torch.Tensor, torch.nn.Module, torch.cuda.Event, *LaunchCounter._kernel_classes()]
    try:
        from triton.runtime.autotuner import Autotuner

        classes.append(Autotuner)
    except ImportError:  # pragma: no cover - every supported Triton has it
        pass
    return classes


def _is_code(value) -> bool:
    return callable(value) or isinstance(value, (type, types.ModuleType))


def _module_hooks() -> dict:
    """torch's process-wide registries of nn.Module hooks (``torch.nn.modules.module._global_forward_hooks`` and
    kin): {registry: ((key, hook identity), ...)}. A hook there runs inside every module, the reference included."""
    registries = vars(torch.nn.modules.module)
    return {name: tuple((key, id(hook)) for key, hook in list(value.items()))
            for name, value in list(registries.items()) if name.startswith("_global_") and isinstance(value, dict)}


def _flags() -> dict:
    """Process-wide switches a candidate could leave on to change what the judge computes or measures."""
    c = torch._C
    matmul = torch.backends.cuda.matmul
    return {
        "torch's global nn.Module hooks": _module_hooks(),
        "torch function modes": c._len_torch_function_stack() if hasattr(c, "_len_torch_function_stack") else 0,
        "torch dispatch modes": c._len_torch_dispatch_stack() if hasattr(c, "_len_torch_dispatch_stack") else 0,
        "sys.settrace": _gettrace(), "sys.setprofile": _getprofile(),
        "python threads": frozenset(_current_frames()),
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "TF32 matmul": matmul.allow_tf32, "TF32 cuDNN": torch.backends.cudnn.allow_tf32,
        "fp16 reduced-precision reduction": matmul.allow_fp16_reduced_precision_reduction,
        "default dtype": torch.get_default_dtype(),
        "sys.modules": id(_modules),
    }


class ModelState:
    """A model's parameters as they were when it was watched: the same tensor objects holding the same bytes (a copy
    on the host, so the watch costs no device memory). The reference's, taken once it is built: the candidate gets
    copies of them (``fitness.judge.candidate.copy_parameters``), and none of them may change. Buffers are left out:
    a reference's own forward may update them (a batch norm's running statistics in training mode)."""

    def __init__(self, model):
        self._model = model
        self._tensors = self._named()
        self._copies = {name: self._bytes(t) for name, t in self._tensors.items()}

    def _named(self) -> dict:
        return dict(self._model.named_parameters())

    @staticmethod
    def _bytes(tensor) -> torch.Tensor:
        return tensor.detach().to("cpu", copy=True).contiguous().reshape(-1).view(torch.uint8)

    def verify(self) -> list[str]:
        now = self._named()
        found = [f"the reference's {name} replaced or deleted" for name, tensor in self._tensors.items()
                 if now.get(name) is not tensor]
        found += [f"the reference's {name} added" for name in now if name not in self._tensors]
        found += [f"the reference's {name} changed" for name, copy in self._copies.items()
                  if now.get(name) is self._tensors[name] and not torch.equal(self._bytes(now[name]), copy)]
        return found


class JudgeState:
    """Identities of what the judge relies on; `verify()` -> the differences, as short descriptions."""

    def __init__(self, owners: dict, modules: dict, flags: dict):
        self._owners = owners  # owner -> (live namespace, {name: object}, strict: nothing may be added)
        self._modules = modules  # module name -> module object (its sys.modules entry)
        self._flags = flags
        self._models: list[ModelState] = []

    def watch(self, model) -> None:
        """Verify from now on that `model`'s parameters stay as they are now (``ModelState``)."""
        self._models.append(ModelState(model))

    @classmethod
    def capture(cls) -> "JudgeState":
        owners, modules = {}, {}

        def take(owner: str, namespace, only_code: bool, strict: bool) -> None:
            owners[owner] = (namespace, {name: value for name, value in list(namespace.items())
                                         if (not only_code or _is_code(value)) and name not in BOOKKEEPING}, strict)

        for name, module in list(_modules.items()):
            if module is None or not _is_own(name):
                continue
            modules[name] = module
            take(name, vars(module), only_code=False, strict=True)
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == name:
                    take(f"{name}.{value.__qualname__}", value.__dict__, only_code=False, strict=True)
        for name in STRICT_MODULES + LOOSE_MODULES + tuple(_referenced(modules)):
            module = _modules.get(name)
            if module is not None and name not in modules:
                modules[name] = module
                strict = name in STRICT_MODULES
                take(name, vars(module), only_code=not strict, strict=strict)
        for klass in _watched_classes():
            take(f"{klass.__module__}.{klass.__qualname__}", klass.__dict__, only_code=False, strict=True)
        return cls(owners, modules, _flags())

    def verify(self) -> list[str]:
        found = []
        for name, module in self._modules.items():
            if _modules.get(name) is not module:
                found.append(f"module {name} replaced in sys.modules")
        found += [f"module {name} added to sys.modules" for name in list(_modules)
                  if _is_own(name) and name not in self._modules]
        for owner, (namespace, values, strict) in self._owners.items():
            for name, value in values.items():
                if namespace.get(name, _MISSING) is not value:
                    found.append(f"{owner}.{name} replaced or deleted")
            added = sorted(n for n in list(namespace) if n not in values and n not in BOOKKEEPING) if strict else []
            if added:
                found.append(f"{owner}: attribute(s) added: {', '.join(added[:MAX_NAMED])}")
        for model in self._models:
            found += model.verify()
        try:
            now = _flags()
        except Exception as exc:  # noqa: BLE001 - e.g. a torch mode left on that refuses the judge's own calls
            return found + [f"process-wide switches unreadable ({type(exc).__name__}: {exc})"[:200]]
        for key, before in self._flags.items():
            if now[key] != before:
                found.append("a Python thread was started" if key == "python threads" else f"{key} changed")
        return found


_MISSING = object()


def _referenced(own: dict) -> list[str]:
    """Modules the evaluator's own code names: imported as modules, or the home of a function or class it
    imported (json, os, statistics, dataclasses, ...)."""
    names = set()
    for module in list(own.values()):
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType):
                names.add(value.__name__)
            elif _is_code(value) and isinstance(getattr(value, "__module__", None), str):
                names.add(value.__module__)
    return sorted(n for n in names if not _is_own(n) and n in _modules)


_OWN_PREFIXES = tuple(own + "." for own in OWN_PACKAGES)


def _is_own(name: str) -> bool:
    """Whether module `name` is the evaluator's own; asked of every module in sys.modules at each launch's check."""
    return name in OWN_PACKAGES or name.startswith(_OWN_PREFIXES)


def describe(differences: list[str]) -> str:
    shown = "; ".join(differences[:MAX_NAMED])
    more = f" (and {len(differences) - MAX_NAMED} more)" if len(differences) > MAX_NAMED else ""
    return shown + more


def judge_state_check(state: JudgeState):
    """verify(where, **verdict fields): raises a rejecting Verdict when candidate code changed the judge's state."""
    def verify(where: str, **fields) -> None:
        differences = state.verify()
        if differences:
            raise Verdict("rejected", f"candidate code changed the evaluator's own state ({where}): "
                          f"{describe(differences)}; the judge, torch and the timers must be left as they are",
                          **fields)
    return verify
