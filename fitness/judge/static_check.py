"""Static check of candidate source, run before any of it executes.

Candidates are untrusted code. This check rejects the constructs that published evaluators have been fooled with:
process, file and network access, FFI, introspection and frame access, monkey-patching of torch / triton / timers,
threads, CUDA streams and graphs, handing the work to another compiler, a tensor's values taken to the host
(``.numpy()``, ``.tolist()``, ``torch.from_numpy``: compute there is invisible to the op trace), torch's global
``nn.Module`` hooks (they would run inside the reference) and code hooked into a Triton launch. Each finding names
its line.
The process isolation in ``fitness.workers.sandbox`` is the second line of defence; this one gives the clear reason.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelevo.core import pyast

TENSOR_DESCRIPTORS = "triton.tools.tensor_descriptor"  # allowed, though below the forbidden triton.tools
ALLOWED_IMPORTS = {
    "torch", "torch.nn", "torch.nn.functional", "torch.cuda", "triton", "triton.language", "math", "typing",
    "functools", "itertools", "dataclasses", "__future__", "numbers", "collections", "collections.abc",
    "torch._inductor.runtime.triton_helpers",  # Inductor's @triton.jit helpers, used by seeds taken from Inductor
    TENSOR_DESCRIPTORS,  # Hopper's TMA: the host's TensorDescriptor (device ones: fitness.judge.tma)
}
INDUCTOR_HELPERS = "torch._inductor.runtime.triton_helpers"  # its public names count as public
# Modules a candidate may use only while its module is built (inside __init__), never in what forward runs: the
# reference's own construction code comes with a seed (level3/30_SwinTransformerV2 builds a buffer with np.log2),
# but numpy in forward would compute on the host, outside the policy's kernels.
CONSTRUCTION_ONLY = {"numpy"}
ALLOWED_IMPORT_PREFIXES = ("triton.language.", "torch.nn.")

IMPORT_REASONS = {
    "os": "process and file access", "sys": "interpreter access", "subprocess": "process access",
    "shutil": "file access", "pathlib": "file access", "io": "file access", "signal": "process access",
    "multiprocessing": "process access", "socket": "network access", "http": "network access",
    "urllib": "network access", "requests": "network access", "ctypes": "FFI", "cffi": "FFI",
    "inspect": "introspection", "gc": "introspection", "traceback": "introspection",
    "importlib": "dynamic imports", "builtins": "builtin patching", "threading": "threads",
    "concurrent": "threads", "asyncio": "threads", "time": "timer access", "timeit": "timer access",
    "pickle": "arbitrary code loading", "marshal": "arbitrary code loading",
}

FORBIDDEN_CALLS = {
    "eval": "dynamic code execution", "exec": "dynamic code execution", "compile": "dynamic code execution",
    "__import__": "dynamic imports", "open": "file access", "globals": "introspection", "locals": "introspection",
    "vars": "introspection", "getattr": "dynamic attribute access", "setattr": "dynamic attribute access",
    "delattr": "dynamic attribute access", "breakpoint": "debugger", "input": "reading stdin",
}

FRAME_ATTRIBUTES = {"f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "cr_frame", "tb_frame",
                    "_getframe"}
ALLOWED_DUNDERS = {"__init__"}

# Dotted prefixes (after resolving import aliases) that are never allowed in a candidate.
FORBIDDEN_APIS = {
    "torch.cuda.Stream": "CUDA streams (work outside the timed stream)",
    "torch.cuda.stream": "CUDA streams (work outside the timed stream)",
    "torch.cuda.ExternalStream": "CUDA streams (work outside the timed stream)",
    "torch.cuda.set_stream": "CUDA streams (work outside the timed stream)",
    "torch.Stream": "CUDA streams (work outside the timed stream)",
    "torch.cuda.graph": "CUDA graphs", "torch.cuda.CUDAGraph": "CUDA graphs",
    "torch.cuda.graphs": "CUDA graphs",
    "torch.compile": "handing the work to torch.compile", "torch.jit": "handing the work to TorchScript",
    "torch.utils": "torch internals (dispatch, extensions)", "torch.library": "registering custom ops",
    "torch.ops": "calling registered ops directly", "torch.backends": "changing precision flags",
    "torch.set_float32_matmul_precision": "changing precision flags",
    "torch.cuda.memory": "allocator control", "torch.cuda.caching_allocator_alloc": "allocator control",
    "torch.cuda.empty_cache": "allocator control",
    "triton.testing": "triton's timing utilities", "triton.runtime": "triton runtime internals",
    "triton.knobs": "triton runtime internals",
    "triton.tools": "triton's tools (only triton.tools.tensor_descriptor is allowed)",
    "triton.set_allocator": "allocator control (the judge sets Triton's allocator for device tensor descriptors)",
    "typing.get_type_hints": "evaluating string annotations (code execution)",
    "torch.save": "file access", "torch.load": "file access", "torch.from_file": "file access",
    "torch.serialization": "file access", "torch.hub": "downloads and file access", "torch.package": "file access",
    "torch.distributed": "network access", "torch.multiprocessing": "process access",
    "torch.from_numpy": "host compute through numpy, which the op trace cannot see",
    # what a construction-only numpy (CONSTRUCTION_ONLY) may not do even in __init__
    "numpy.ctypeslib": "FFI", "numpy.load": "file access", "numpy.loadtxt": "file access",
    "numpy.genfromtxt": "file access", "numpy.fromregex": "file access", "numpy.memmap": "file access",
    "numpy.save": "file access", "numpy.savez": "file access", "numpy.savez_compressed": "file access",
    "numpy.savetxt": "file access", "numpy.lib": "file access (numpy.lib.format.open_memmap, ...)",
    "numpy.DataSource": "file access", "numpy.f2py": "compiling native code", "numpy.testing": "process access",
}

# Attribute names that are refused wherever they appear, whatever object they are read from.
FORBIDDEN_ATTRIBUTES = {
    "get_type_hints": "evaluating string annotations (code execution)", "tofile": "file access",
    "fromfile": "file access", "from_file": "file access",
    "numpy": "a tensor's values taken to the host as numpy, where the op trace cannot see what is computed",
    "tolist": "a tensor's values taken to the host as Python numbers, where the op trace cannot see what is computed",
    "ctypeslib": "FFI", "add_pre_run_hook": "code run inside a Triton launch",
}
# torch's process-wide registries of module hooks (torch.nn.modules.module.register_module_forward_hook and its
# kin): a hook registered there runs inside every module, the reference's own forward and construction included.
GLOBAL_HOOK_PREFIX = "register_module_"
GLOBAL_HOOK_REASON = "a global nn.Module hook runs inside the reference too"

# Modules that other modules expose as attributes (torch.os, torch.sys, ...): an attribute chain through one of
# these names is refused whatever its root, e.g. torch.os.system, m.sys.modules with m = torch.
DANGEROUS_MODULE_ATTRIBUTES = {name for name in IMPORT_REASONS if name not in ("time", "timeit")}


@dataclass(frozen=True)
class Finding:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class _Checker(ast.NodeVisitor):
    def __init__(self):
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module path it refers to
        self.functions: list[str] = []  # the names of the functions the visited node is in, innermost last

    def report(self, node, message: str) -> None:
        self.findings.append(Finding(getattr(node, "lineno", 0), message))

    # imports -------------------------------------------------------------------------------------------------
    def _check_module(self, node, module: str) -> bool:
        root = module.split(".")[0]
        if module in ALLOWED_IMPORTS or module.startswith(ALLOWED_IMPORT_PREFIXES) or root in CONSTRUCTION_ONLY:
            before = len(self.findings)  # a construction-only module's uses are checked where they are
            if root in CONSTRUCTION_ONLY:  # (_check_construction); its forbidden parts here (numpy.ctypeslib)
                self._check_api(node, module)
            return len(self.findings) == before
        reason = IMPORT_REASONS.get(root, "only torch, triton and math are allowed")
        self.report(node, f"import of '{module}' is not allowed ({reason})")
        return False

    def visit_Import(self, node):
        for alias in node.names:
            self._check_module(node, alias.name)  # a forbidden module stays an alias: patching it is reported too
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node):
        module = node.module or ""
        if node.level or not self._check_module(node, module):
            if node.level:
                self.report(node, "relative imports are not allowed")
            return
        for alias in node.names:
            full, before = f"{module}.{alias.name}", len(self.findings)
            self._check_api(node, full)
            if len(self.findings) == before:
                self._check_attribute_name(node, alias.name)
            self.aliases[alias.asname or alias.name] = full

    # names, attributes, calls ----------------------------------------------------------------------------------
    def _dotted(self, node) -> str | None:
        """The dotted path an expression names, with import aliases resolved (e.g. tl.load -> triton.language.load)."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id)
        if root is None:
            return None
        return ".".join([root, *reversed(parts)])

    def _check_api(self, node, dotted: str) -> None:
        if dotted == TENSOR_DESCRIPTORS or dotted.startswith(TENSOR_DESCRIPTORS + "."):
            forbidden = {}  # the one allowed module below a forbidden prefix; private names still refused below
        else:
            forbidden = FORBIDDEN_APIS
        for prefix, reason in forbidden.items():
            if dotted == prefix or dotted.startswith(prefix + "."):
                self.report(node, f"'{dotted}' is not allowed ({reason})")
                return
        inner = ("helpers." + dotted[len(INDUCTOR_HELPERS) + 1:] if dotted.startswith(INDUCTOR_HELPERS + ".")
                 else dotted)  # below the helpers module the usual rule applies
        if any(part.startswith("_") for part in inner.split(".")[1:]):
            self.report(node, f"'{dotted}' is a private API of a library (not allowed)")

    def _check_chain(self, node) -> None:
        """Refuse a chain that passes through an attribute named like a dangerous module: a.os.system anywhere,
        and torch.os itself when the root is a module."""
        parts, root = [], node
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        parts.reverse()
        from_module = isinstance(root, ast.Name) and root.id in self.aliases
        for i, part in enumerate(parts):
            if part in DANGEROUS_MODULE_ATTRIBUTES and (from_module or i < len(parts) - 1):
                self.report(node, f"attribute chain through module '.{part}' is not allowed "
                                  f"({IMPORT_REASONS[part]})")
                return

    def visit_FunctionDef(self, node):
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self.functions.append("<lambda>")
        self.generic_visit(node)
        self.functions.pop()

    def _check_construction(self, node, dotted: str | None, bare: bool) -> None:
        """A construction-only module (CONSTRUCTION_ONLY) used outside an __init__, or passed around itself."""
        root = (dotted or "").split(".")[0]
        if root not in CONSTRUCTION_ONLY:
            return
        if self.functions[-1:] != ["__init__"]:
            self.report(node, f"'{dotted}' outside __init__ is not allowed ({root} computes on the host: only "
                              f"building the module may use it)")
        elif bare and dotted == root:
            self.report(node, f"the module '{root}' itself as a value is not allowed (it would reach forward)")

    def visit_Attribute(self, node):
        self._check_chain(node)
        if node.attr in FRAME_ATTRIBUTES:
            self.report(node, f"frame access '.{node.attr}' is not allowed (introspection)")
        elif node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ALLOWED_DUNDERS:
            self.report(node, f"dunder attribute '.{node.attr}' is not allowed (introspection)")
        dotted, before = self._dotted(node), len(self.findings)
        if dotted is not None:
            self._check_api(node, dotted)
            self._check_construction(node, dotted, bare=False)
        if len(self.findings) == before:  # one finding per construct
            self._check_attribute_name(node, node.attr)
        if dotted is None:  # a resolved chain was checked whole; do not re-check its prefixes
            self.generic_visit(node)

    def _check_attribute_name(self, node, name: str) -> None:
        if name in FORBIDDEN_ATTRIBUTES:
            self.report(node, f"'.{name}' is not allowed ({FORBIDDEN_ATTRIBUTES[name]})")
        elif name.startswith(GLOBAL_HOOK_PREFIX):
            self.report(node, f"'.{name}' is not allowed ({GLOBAL_HOOK_REASON})")

    def visit_Name(self, node):
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.report(node, f"'{node.id}' is not allowed (introspection)")
        self._check_construction(node, self.aliases.get(node.id), bare=True)

    def visit_Call(self, node):
        if self._plain_getattr(node):
            return
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            self.report(node, f"call to {node.func.id}() is not allowed ({FORBIDDEN_CALLS[node.func.id]})")
        self.generic_visit(node)

    def _plain_getattr(self, node) -> bool:
        """getattr(obj, "name", default) with a constant identifier is ordinary attribute access: checked as
        obj.name (so getattr(torch, "compile", None) or getattr(f, "__globals__", None) are still refused)."""
        if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) == 3
                and not node.keywords and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and node.args[1].value.isidentifier()):
            return False
        attribute = ast.copy_location(ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load()),
                                      node)
        self.visit(attribute)
        self.visit(node.args[2])
        return True

    # assignments: no monkey-patching of modules -----------------------------------------------------------------
    def _check_target(self, target) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt)
            return
        if isinstance(target, ast.Starred):
            self._check_target(target.value)
            return
        base = target
        while isinstance(base, (ast.Attribute, ast.Subscript)):
            base = base.value
        if target is not base and isinstance(base, ast.Name) and base.id in self.aliases:
            self.report(target, f"assignment into module '{self.aliases[base.id]}' is not allowed (monkey-patching)")

    def visit_Assign(self, node):
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)
        dotted = self._dotted(node.value)  # m = torch; m = torch.cuda: m is that module from now on
        for target in node.targets:
            if isinstance(target, ast.Name):
                if dotted is not None:
                    self.aliases[target.id] = dotted
                else:
                    self.aliases.pop(target.id, None)

    def visit_AugAssign(self, node):
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)


def check_source(source: str) -> list[Finding]:
    """All findings for a candidate's source; an empty list means it may run. Raises SyntaxError."""
    tree = pyast.parse(source)
    checker = _Checker()
    checker.visit(tree)
    return sorted(set(checker.findings), key=lambda f: f.line)
