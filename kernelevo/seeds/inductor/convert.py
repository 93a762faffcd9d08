"""Turn what Inductor wrote for a problem (``capture.py``) into a standalone, readable candidate module.

The candidate has the problem's imports and constants, Inductor's ``@triton.jit`` kernels as plain kernels (its
heuristics decorator dropped; its jit helpers imported from ``torch._inductor.runtime.triton_helpers``; libdevice
calls written as the ``tl`` functions they are, and for the interpreter the others as their CPU forms,
``libdevice.py``), each kernel's launch configuration as module-level constants
declared in ``TUNABLE`` (Inductor's choice first), and ``ModelNew``: the problem's ``Model`` constructor verbatim
(same parameters and buffers) with a ``forward`` that is Inductor's ``call`` with explicit grids and launches; with
``triton_convolutions``, its library convolutions and attention calls as kernelevo's own Triton convolution and
flash attention (``convolutions.py``, ``attentions.py``); and always, the calls of kernelevo's recurrent operators (a
problem's nn.LSTM / nn.GRU, swapped at capture) as kernelevo's own Triton RNN (``recurrent.py``). A forward of many
launches launches through its compiled kernels after each site's first launch (``launches.py``).
"""
from __future__ import annotations

import ast
import math

from kernelevo.core import pyast
from kernelevo.seeds.inductor.sizes import sizes_note
from kernelevo.seeds.inductor.attentions import NOTE as ATTENTION_NOTE, Attentions, attention_op
from kernelevo.seeds.inductor.attentions import kernel_source as attention_source
from kernelevo.seeds.inductor.convolutions import LIBRARY_CALL, NOTE, Convolutions, kernel_source
from kernelevo.seeds.inductor.epilogues import NOTE as EPILOGUE_NOTE, Epilogues
from kernelevo.seeds.inductor.reductions import NOTE as REDUCTION_NOTE
from kernelevo.seeds.inductor.errors import OTHER_SEEDS, SeedError
from kernelevo.seeds.inductor.grids import YZ_OVERFLOW_HELPER, launch_grid
from kernelevo.seeds.inductor import input_guard
from kernelevo.seeds.inductor import launches, libdevice, randoms, recurrent
from kernelevo.seeds.inductor.reference import forward_arguments, model_parts, model_with, used_statements
from kernelevo.seeds.inductor.templates import (K_MAJOR_COPY, K_MAJOR_NOTE, inductor_meta, is_gemm_template,
                                                is_template,
                                      k_major_loads, persistent_programs, template_grid, template_kernel)

LIBDEVICE_AS_TL = {"exp": "tl.exp", "exp2": "tl.exp2", "log": "tl.log", "log2": "tl.log2", "sqrt": "tl.sqrt",
                   "rsqrt": "tl.rsqrt", "sin": "tl.sin", "cos": "tl.cos", "abs": "tl.abs", "floor": "tl.floor",
                   "ceil": "tl.ceil", "erf": "tl.erf", "fma": "tl.fma", "sigmoid": "tl.sigmoid"}
# Triton's interpreter runs a jit combine function once per element (minutes for one row): on the CPU, Inductor's
# NaN-propagating helpers become Triton's builtins (which do not propagate NaN in max/min)
INTERPRETER_HELPERS = {"maximum": "tl.maximum", "minimum": "tl.minimum", "max2": "tl.max", "min2": "tl.min",
                       "sum2": "tl.sum"}
DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream"}
ALLOCATORS = {"empty_strided_cuda", "empty_strided_cpu", "empty_strided"}
WARPS, STAGES = [1, 2, 4, 8, 16, 32], [1, 2, 3, 4, 5]
NO_TRITON_KERNEL = "Inductor generated no Triton kernel for this problem (it calls library kernels only)"


# kernels -----------------------------------------------------------------------------------------------------------
def kernel_function(name: str, source: str, interpreter: bool = False) -> ast.FunctionDef:
    """The kernel's function from its Inductor module, with only @triton.jit left, libdevice mapped to tl (and on
    the interpreter, Inductor's reduction helpers to Triton's builtins, the other libdevice calls to their CPU forms:
    ``libdevice.py``)."""
    function = next((n for n in pyast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if function is None:
        raise SeedError(f"kernel {name}: no function of that name in Inductor's kernel source")
    function.decorator_list = [ast.parse("triton.jit", mode="eval").body]
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "libdevice" \
                and node.attr in LIBDEVICE_AS_TL:
            node.value.id, node.attr = LIBDEVICE_AS_TL[node.attr].split(".")
        if interpreter and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "triton_helpers" and node.attr in INTERPRETER_HELPERS:
            node.value.id, node.attr = INTERPRETER_HELPERS[node.attr].split(".")
    return libdevice.for_interpreter(function) if interpreter else function


def jit_helpers(source: str, kernel: str) -> dict:
    """Other @triton.jit functions of a kernel's Inductor module (a scan's combine function, say), by name."""
    return {n.name: n for n in pyast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name != kernel
            and any("jit" in ast.unparse(d) for d in n.decorator_list)}


def signature(function: ast.FunctionDef) -> tuple[list[str], list[str]]:
    """(runtime argument names, constexpr parameter names) of a kernel."""
    runtime, constexpr = [], []
    for arg in function.args.args:
        is_constexpr = arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation)
        (constexpr if is_constexpr else runtime).append(arg.arg)
    return runtime, constexpr


def unmasked(function: ast.FunctionDef, prefix: str) -> bool:
    """True when Inductor dropped the bound check of a dimension (``xmask = tl.full(...)``): its block size must
    then divide the dimension's size."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == f"{prefix}mask":
            return "tl.full" in ast.unparse(node.value)
    return False


def block_choices(default: int, numel: int | None, must_divide: bool) -> list[int]:
    top = max(default, 1 << max(int(numel or 1) - 1, 0).bit_length())
    choices = {default, *[1 << k for k in range(int(math.log2(top)) + 1)]}
    choices = [c for c in sorted(choices) if c <= max(top, default)]
    if must_divide and numel:
        choices = [c for c in choices if numel % c == 0 or c == default]
    near = sorted(choices, key=lambda c: (abs(math.log2(c) - math.log2(default)), c))[:6]
    return sorted(set(near) | {default})


# forward -----------------------------------------------------------------------------------------------------------
class CallRewriter(ast.NodeTransformer):
    """Inductor's ``call`` body -> statements of ``forward``."""

    def __init__(self, kernels: dict, device_expr: str, convolutions: Convolutions | None = None,
                 attentions: Attentions | None = None, recurrents: recurrent.Recurrents | None = None,
                 guard: tuple | None = None):
        self.kernels, self.device_expr, self.convolutions = kernels, device_expr, convolutions
        self.attentions, self.recurrents = attentions, recurrents
        self.guard = guard  # (labels, dtypes, device type): call()'s arguments' asserts as input_guard's checks

    def visit_With(self, node):  # torch.cuda._DeviceGuard(0): the device is the inputs' device
        kept = []
        for statement in node.body:
            visited = self.visit(statement)
            kept += visited if isinstance(visited, list) else [visited] if visited is not None else []
        return kept

    def visit_Delete(self, node):
        return None

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call):
            text = ast.unparse(call.func)
            checked = input_guard.guard_statement(call, *self.guard) if self.guard else None
            if checked is not None:
                return checked
            if text.split(".")[-1] in DROPPED_CALLS or text in ("args.clear", "torch.cuda.set_device"):
                return None
            if isinstance(call.func, ast.Attribute) and call.func.attr == "run" and \
                    ast.unparse(call.func.value) in self.kernels:
                return ast.Expr(self.launch(ast.unparse(call.func.value), call))
        return self.generic_visit(node)

    def visit_Assign(self, node):
        value = node.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) in DROPPED_CALLS:
            return None
        if isinstance(value, ast.Call) and ast.unparse(value.func) == LIBRARY_CALL and self.convolutions:
            node.value = self.convolutions.launch(ast.unparse(node.targets[0]), value)
        elif isinstance(value, ast.Call) and self.attentions and attention_op(ast.unparse(value.func)):
            node.value = self.attentions.rewrite(ast.unparse(node.targets[0]), value)
        elif recurrent.is_recurrent(value) and self.recurrents:
            node.value = self.recurrents.launch(value)
        return self.generic_visit(node)

    def visit_Call(self, node):
        self.generic_visit(node)
        name = ast.unparse(node.func)
        if name in ALLOCATORS:
            size, stride, dtype = node.args[:3]
            return ast.parse(f"torch.empty_strided({ast.unparse(size)}, {ast.unparse(stride)}, "
                             f"dtype={ast.unparse(dtype)}, device={self.device_expr})", mode="eval").body
        if name == "reinterpret_tensor":
            return ast.parse("torch.as_strided(" + ", ".join(ast.unparse(a) for a in node.args) + ")",
                             mode="eval").body
        if name.startswith("extern_kernels."):
            node.func = ast.parse("torch." + name.split(".", 1)[1], mode="eval").body
        elif randoms.is_draw(name):  # forward's random draws (level3/35's torch.randn): torch's own functions
            return randoms.torch_draw(node, self.device_expr)
        elif name.startswith(("aten.", "torch.ops.")):
            raise SeedError(f"Inductor calls the ATen operator {name} directly{randoms.refused(name)}; {OTHER_SEEDS}")
        return node

    @staticmethod
    def operand(info: dict, name: str, value: str) -> str:
        """A template kernel's argument, through a K-major copy when the kernel's constant asks (templates.py)."""
        if name not in info.get("k_major", {}):
            return value
        param, k, other, batch = info["k_major"][name]
        batched = f", {batch}" if batch > 1 else ""
        return f"(k_major({value}, {k}, {other}{batched}) if {param} else {value})"

    def launch(self, kernel: str, call: ast.Call) -> ast.Call:
        info = self.kernels[kernel]
        config = ", ".join(f"{k}={v}" for k, v in info["constants"].items())
        if info.get("template"):
            count = len(info["runtime"])
            launch_args = ", ".join(self.operand(info, name, ast.unparse(a))
                                    for name, a in zip(info["runtime"], call.args[:count]))
            grid = template_grid(kernel, info, call.args[count:])
            return ast.parse(f"{kernel}[({grid})]({launch_args}, {config})", mode="eval").body
        count = len(info["runtime"])
        numels = {name: ast.unparse(a) for name, a in zip(info["runtime"], call.args) if name.endswith("numel")}
        grid = launch_grid(kernel, info["grid_type"], numels, info["constants"],
                           [ast.unparse(a) for a in call.args[count:]], info["meta"])
        launch_args = ", ".join(ast.unparse(a) for a in call.args[:count])
        return ast.parse(f"{kernel}[{grid}]({launch_args}, {config})", mode="eval").body


# the module ----------------------------------------------------------------------------------------------------------
def kernel_sources(code_tree: ast.Module) -> list[tuple[str, str]]:
    """(name, source) of each kernel Inductor's output module compiles (``async_compile.triton``)."""
    found = []
    for node in ast.walk(code_tree):
        if (isinstance(node, ast.Call) and ast.unparse(node.func) == "async_compile.triton"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):
            found.append((node.args[0].value, node.args[1].value))
    return found


def _literal_numel(function: ast.FunctionDef, name: str) -> int | None:
    for node in function.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == name and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            return node.value.value
    return None


def _call_function(code_tree: ast.Module) -> ast.FunctionDef:
    calls = [n for n in ast.walk(code_tree) if isinstance(n, ast.FunctionDef) and n.name == "call"]
    if not calls:
        raise SeedError("Inductor's output has no call() function; this torch version's output is not supported")
    return calls[0]


def bound(arg: dict, inputs: list[str], home: str | None = None) -> str:
    """What forward binds one of Inductor's call() arguments to: a parameter or buffer of the module (by its
    qualified name: ``network.0.weight`` of an ``nn.Sequential`` through ``get_parameter``), an input, or a plain
    tensor attribute (level3/33_VanillaRNN's ``self.hidden``, made on the CPU in ``__init__`` and moved to the
    inputs' device by forward, as the model's own forward does; on the device of `home`, the first parameter,
    buffer or input bound)."""
    if arg["kind"] == "input":
        return inputs[arg["index"]]
    if arg["kind"] == "attribute":
        path, _, key = arg["name"].rpartition(".")
        owner = "self" if not path else f"self.{path}" if all(p.isidentifier() for p in path.split(".")) \
            else f"self.get_submodule({path!r})"
        return f"{owner}.{key}.to({home}.device)" if home else f"{owner}.{key}"
    if all(part.isidentifier() for part in arg["name"].split(".")):
        return f"self.{arg['name']}"
    getter = "get_parameter" if arg["kind"] == "param" else "get_buffer"
    return f"self.{getter}({arg['name']!r})"


def convert(captured: dict, problem_source: str, title: str, interpreter: bool | None = None,
            triton_convolutions: bool = False, tf32: bool = False, epilogues: bool = True) -> str:
    """The candidate module's source (see the module docstring). `interpreter`: write it for Triton's CPU
    interpreter (default: when it was captured on the CPU); `triton_convolutions`: Inductor's library convolutions
    and attention calls as kernelevo's Triton convolution and flash attention, their dot products in TF32 where
    `tf32`; `epilogues`: the pointwise kernels after those convolutions fused into them where they can be
    (``epilogues.py``). Any failure is a SeedError saying what failed."""
    try:
        return _convert(captured, problem_source, title, interpreter, triton_convolutions, tf32, epilogues)
    except SeedError:
        raise
    except Exception as exc:  # noqa: BLE001 - a converter bug is a seed's failure with its reason, not a traceback
        raise SeedError(f"the converter failed on Inductor's code for {title} ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''}); {OTHER_SEEDS}") from exc


def _convert(captured: dict, problem_source: str, title: str, interpreter: bool | None, triton_convolutions: bool,
             tf32: bool, epilogues: bool = True) -> str:
    interpreter = captured.get("device") == "cpu" if interpreter is None else interpreter
    code_tree = pyast.parse(captured["code"])
    kernels, functions, constants, tunable, helpers = {}, [], [], {}, {}
    for index, (name, source) in enumerate(kernel_sources(code_tree)):
        function = kernel_function(name, source, interpreter=interpreter)
        helpers.update({n: libdevice.for_interpreter(f) if interpreter else f
                        for n, f in jit_helpers(source, name).items()})
        meta = inductor_meta(source, name)
        template = is_template(meta) and is_gemm_template(function)  # another template: a fixed grid (templates.py)
        names, extra = {}, {}
        if template:
            defaults, choices, sizes = template_kernel(function)
            copies = k_major_loads(function, sizes)  # {runtime argument: (parameter, K, other size, batch)}
            extra = {"template": True, "sizes": sizes, "defaults": defaults,
                     "persistent": persistent_programs(function),
                     "k_major": {arg: (f"K{index}_{param}", *rest) for arg, (param, *rest) in copies.items()}}
            for block, value in [*defaults.items(), *((param, 1) for param, *_ in copies.values())]:
                names[block] = f"K{index}_{block}"
                constants.append((names[block], value))
                tunable[names[block]] = choices.get(block, [0, 1])
        runtime, constexpr = signature(function)
        constexpr = [c for c in constexpr if c not in names]
        options = captured["kernels"].get(name, {}).get("configs") or [{"kwargs": {}, "num_warps": 4,
                                                                          "num_stages": 1}]
        config = options[0]
        for param in constexpr:
            if param not in config["kwargs"]:
                raise SeedError(f"kernel {name}: Inductor's configuration gives no value for {param}")
            names[param] = f"K{index}_{param}"
            dim = param[0].lower() if param[0] in "XYZ" else "r0_"
            numel = _literal_numel(function, f"{dim}numel")
            constants.append((names[param], config["kwargs"][param]))
            tunable[names[param]] = block_choices(config["kwargs"][param], numel, unmasked(function, dim))
        for key, choices in (("num_warps", WARPS), ("num_stages", STAGES)):
            names[key] = f"K{index}_{key.upper()}"
            constants.append((names[key], config[key]))
            tunable[names[key]] = sorted(set(choices) | {config[key]})
        kernels[name] = {"runtime": runtime, "constants": names, "grid_type": meta.get("grid_type", "Grid1D"),
                         "meta": meta, **extra}
        functions.append(function)
    if interpreter:
        helpers.update(libdevice.forms_called([*helpers.values(), *functions]))

    header, model = model_parts(problem_source)
    call = _call_function(code_tree)
    unpack = call.body[0]
    arg_names = [ast.unparse(e) for e in unpack.targets[0].elts] if isinstance(unpack, ast.Assign) and \
        isinstance(unpack.targets[0], ast.Tuple) else []
    if len(arg_names) != len(captured["args"]):
        raise SeedError(f"Inductor's call() takes {len(arg_names)} arguments but {len(captured['args'])} were "
                        f"identified; {OTHER_SEEDS}")
    inputs, written = forward_arguments(model)
    args = captured["args"]
    home = next((bound(a, inputs) for a in args if a["kind"] in ("param", "buffer", "input")), None)
    bound_to = {n: bound(a, inputs, home) for n, a in zip(arg_names, args) if a["kind"] != "size"}
    bind = [f"{n} = {value}" for n, value in bound_to.items()]
    bind += [f"{n} = {arg_names[a['of']]}.size({a['dim']})" for n, a in zip(arg_names, args) if a["kind"] == "size"]
    tensor = next((n for n, a in zip(arg_names, args) if a["kind"] != "size"), None)
    convolutions = Convolutions(call.body, WARPS, STAGES) if triton_convolutions else None
    attentions = Attentions(call.body, WARPS, STAGES, own=triton_convolutions)  # else torch's public SDPA
    recurrents = recurrent.Recurrents(WARPS, STAGES, bound_to)  # kernelevo's own operators: always its Triton RNN
    guard = (bound_to, input_guard.input_dtypes(code_tree),
             "cpu" if interpreter else str(captured.get("device", "cuda")).split(":")[0])
    body = CallRewriter(kernels, f"{tensor}.device" if tensor else "'cuda'", convolutions, attentions,
                        recurrents, guard).visit(ast.Module(body=call.body[1:], type_ignores=[])).body
    own = [r for r in (convolutions, attentions, recurrents) if r and r.count]  # kernelevo's kernels for library calls
    if not functions and not own:
        raise SeedError(f"{NO_TRITON_KERNEL}: {OTHER_SEEDS}")
    for replaced in own:
        constants += replaced.constants
        tunable.update(replaced.tunable)
    fused = Epilogues(kernels, functions, convolutions.sizes) if epilogues and convolutions else None
    if fused:
        body, functions = fused.fuse(body), fused.functions
        constants, tunable = fused.pruned(constants, tunable)
    last = body[-1] if body else None
    returned = isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple)
    if returned and captured.get("outputs") and len(last.value.elts) > captured["outputs"]:
        del last.value.elts[captured["outputs"]:]  # the new values of tensor attributes forward assigns (level3/33)
    if captured.get("single_output") and returned and len(last.value.elts) == 1:
        last.value = last.value.elts[0]
    body, through_sites = launches.through_sites(body, kernels, list(bound_to))
    guarded = f"{input_guard.GUARD}(" in ast.unparse(ast.Module(body=body, type_ignores=[]))
    forward = pyast.parse(f"def forward({written}):\n    pass").body[0]
    forward.body = [*pyast.parse("\n".join(bind)).body, *body]
    model_new = model_with(model, forward)

    used = ast.unparse(ast.Module(body=[*helpers.values(), *functions], type_ignores=[]))
    imports = ["import torch", "import torch.nn as nn", "import triton", "import triton.language as tl"]
    if "triton_helpers." in used:
        imports.append("import torch._inductor.runtime.triton_helpers as triton_helpers")
    if "libdevice." in used:
        imports.append("from triton.language.extra import libdevice")
    if "tl_math." in used:
        imports.append("from triton.language import math as tl_math")
    versions = captured.get("versions", {})
    copied = any(k.get("k_major") for k in kernels.values())
    doc = (f'"""Seed for {title}: the Triton kernels torch.compile (Inductor) generated for this problem '
           f'(torch {versions.get("torch", "?")}, triton {versions.get("triton", "?")}, captured on '
           f'{captured.get("device", "?")}), as a standalone candidate.\n\nEach kernel\'s launch configuration is '
           f'a constant below (Inductor\'s choice) declared in TUNABLE; forward is Inductor\'s call() with explicit '
           f'grids. ' + sizes_note(captured) + (K_MAJOR_NOTE if copied else '')
           + (NOTE if convolutions and convolutions.count else '')
           + (EPILOGUE_NOTE if fused and fused.count else '')
           + (REDUCTION_NOTE if fused and fused.reduced else '')
           + (ATTENTION_NOTE if attentions and attentions.count else '')
           + (recurrent.NOTE if recurrents.count else '')
           + (randoms.NOTE if randoms.draws_in(forward) else '')
           + (launches.NOTE if through_sites else '')
           + (input_guard.NOTE if guarded else '') + '"""')
    parts = [doc, "\n".join(imports), "",
             "\n".join(f"{n} = {v!r}" for n, v in constants) + f"\nTUNABLE = {tunable!r}"]
    parts += [ast.unparse(f) for f in [*helpers.values(), *functions]]
    parts += [K_MAJOR_COPY.strip()] if copied else []
    parts += [kernel_source(tf32)] if convolutions and convolutions.count else []
    parts += [attention_source(tf32)] if attentions and attentions.count else []
    parts += [kernel_source(tf32, recurrent.KERNEL_FILE)] if recurrents.count else []
    parts += [YZ_OVERFLOW_HELPER.strip()] if "yz_overflow_grid(" in ast.unparse(forward) else []
    parts += [launches.LAUNCH_SITES_HELPER.strip()] if through_sites else []
    parts += [input_guard.GUARD_HELPER.strip()] if guarded else []
    parts += [ast.unparse(model_new)]
    kept = used_statements(header, imports, "\n".join(parts[3:]))
    parts[2] = ast.unparse(ast.Module(body=kept, type_ignores=[]))
    return "\n\n\n".join(p for p in parts if p.strip()) + "\n"

