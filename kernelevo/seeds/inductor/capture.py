"""Capture what torch.compile (Inductor) writes for a problem's Model: run as its own process, on the device the
search runs on, so the search process never imports Inductor or compiles anything itself::

    python -m kernelevo.seeds.inductor.capture SPEC.json OUT.json DEVICE [templates] [tf32] [dynamic] [variants=V.json]
        [gpu_lock=PATH] [autotune_up_to=N]

SPEC.json is a ProblemSpec (``to_dict``); V.json maps names to Inductor options (``{"nd_tiling": {"triton":
{"prefer_nd_tiling": true}}}``; default ``{"default": {}}``; under ``decompositions`` the capture's own:
``decompositions.py``), each compiled in turn; OUT.json maps each name to::

    {"code": Inductor's output module, "args": [{"kind": "param"|"buffer"|"attribute"|"input", "name"|"index"}
                                                 | {"kind": "size", "of": position, "dim": d}, ...],
     "kernels": {name: {"configs": [{"kwargs": {...}, "num_warps": n, "num_stages": n}, ...]}},
     "single_output": bool, "outputs": n, "dynamic": bool, "specialised": [...], "fell_back": [...],
     "versions": {"torch": ..., "triton": ...}, "options": {...}}

or to ``{"error": why}`` when Inductor fails under that name's options (the others are still captured); each with
``"seconds"``, the time its capture took, and ``"finished_at"`` (``time.time()``). OUT.json is written whole after
each name (``os.replace``), so the process that started this one reads each capture as it finishes and keeps it when
this one is stopped or dies (``process.py``).

``args`` says what each argument of Inductor's ``call(args)`` is (found by identity of the tensors Dynamo hands the
backend; with dynamic shapes a size argument is a size of another argument). ``configs`` are the launch
configurations Inductor's heuristics offer for each kernel, in its order; on a GPU the kernels are also run once
and the first entry is the configuration Inductor's own autotuning picked. On the CPU (tests) Inductor is asked
for Triton code (``cpu_backend="triton"``) that Triton's interpreter runs.
``dynamic``: compiled with dynamic shapes, so the code reads its sizes from its inputs (``specialised``: the sizes
Dynamo kept as literals all the same, where they are a size constant's value that other sizes change);
``fell_back``: why earlier captures were not kept (``_first_that_converts``).
``templates``: matmuls as Inductor's Triton GEMM templates (max-autotune over Triton's backend only), not cuBLAS
calls (convolutions stay library calls, never its conv templates: ``template_choices.LIBRARY_CONVOLUTIONS``); on a
GPU only (Inductor's templates fail to build for the CPU here). ``autotune_up_to``: the default capture of a graph
with more distinct matmuls and convolutions than N takes each template's first configuration without benchmarking
(``template_choices.py``; ``"template_configs"`` in its capture says so); the variants autotune as always.
``tf32``: fp32 matmuls may use TF32 (the precision policy's choice; torch.compile's baseline runs under the same
setting), so the templates do too.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

from kernelevo.seeds.inductor.decompositions import own_options
from kernelevo.seeds.inductor.kernel_configs import config_dict, kernel_configs, picked_config
from kernelevo.seeds.inductor.template_choices import (LIBRARY_CONVOLUTIONS, TEMPLATE_DECOMPOSITIONS, TEMPLATE_OPTIONS,
                                              present, template_calls, template_choices, template_shapes)


def _prepare(device: str, templates: bool, tf32: bool) -> None:
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch._inductor.config as inductor_config
    import torch.utils._triton as triton_utils

    inductor_config.fx_graph_cache = False  # a cached graph would skip the code generation captured here
    inductor_config.fallback_random = True  # torch's random functions, not Inductor's Philox numbers (randoms.py)
    if device == "cpu":
        inductor_config.cpu_backend = "triton"
        triton_utils.triton_hash_with_backend = lambda: "interpreter"  # no GPU backend to hash
    import torch

    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if templates:
        for key, value in present(TEMPLATE_OPTIONS, inductor_config).items():
            *path, name = key.split(".")
            setattr(functools.reduce(getattr, path, inductor_config), name, value)


def _arg_map(model, inputs, example_inputs, dynamic: bool = False) -> list[dict]:
    import torch

    named = [("param", n, p) for n, p in model.named_parameters()] + [("buffer", n, b) for n, b in
                                                                     model.named_buffers()]
    attributes = [("attribute", f"{prefix}.{key}" if prefix else key, value)  # plain tensors: level3/33's hidden
                  for prefix, module in model.named_modules() for key, value in vars(module).items()
                  if isinstance(value, torch.Tensor)]
    mapping = []
    for tensor in example_inputs:
        kind = next(({"kind": k, "name": n} for k, n, t in named if t is tensor), None)
        if kind is None:  # an input before an attribute: forward may have kept its input as one (self.last = x)
            kind = next(({"kind": "input", "index": i} for i, x in enumerate(inputs) if x is tensor), None)
        if kind is None:
            kind = next(({"kind": k, "name": n} for k, n, t in attributes if t is tensor), None)
        if kind is None and dynamic and not isinstance(tensor, torch.Tensor):
            kind = {"kind": "size"}  # a size argument: _size_args says whose
        if kind is None:
            raise RuntimeError("Inductor's graph takes a tensor that is neither a parameter, a buffer, a tensor "
                               "attribute of a module nor an input of forward (a constant made in forward?); this "
                               "problem needs a hand-written seed")
        mapping.append(kind)
    return mapping


def flat_options(options: dict, prefix: str = "") -> dict:
    """``{"triton": {"prefer_nd_tiling": True}}`` -> ``{"triton.prefer_nd_tiling": True}``, as Inductor's
    ``config.patch`` takes them."""
    flat = {}
    for key, value in options.items():
        if isinstance(value, dict):
            flat.update(flat_options(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def capture(spec_dict: dict, device: str, templates: bool = False, tf32: bool = False,
            variants: dict | None = None, dynamic: bool = False, done: Callable[[dict], None] | None = None,
            gpu_lock: str | None = None, autotune_up_to: int | None = None) -> dict:
    """Inductor's code for the problem under each named set of options (default: its defaults only). `dynamic`:
    compiled with dynamic shapes (sizes as arguments of Inductor's code), falling back to the sizes as literals
    where Inductor or the converter cannot (``_first_that_converts``). `done` is called with the captures so far
    after each one. `gpu_lock` (a GPU's ``fitness.common.gpu_lock`` file): held shared while the model runs eagerly
    and while Inductor benchmarks its choices or runs the compiled graph (``inductor_benchmarks_shared``), not while
    it compiles: a capture compiling for minutes no longer keeps its GPU's neighbours from timing."""
    _prepare(device, templates, tf32)
    import torch
    import torch._inductor.config as inductor_config

    from fitness.common.gpu_lock import inductor_benchmarks_shared
    from fitness.problems.problem import ProblemSpec, call_get_init_inputs, call_get_inputs, load_problem
    from kernelevo.seeds.inductor.rnn_ops import swap_recurrent

    spec = ProblemSpec.from_dict(spec_dict)
    problem = load_problem(spec)
    torch.manual_seed(0)
    model = problem.Model(*call_get_init_inputs(problem)).to(device).eval()
    try:  # nn.LSTM / nn.GRU, which Dynamo refuses, as calls of kernelevo's recurrent operators (rnn_ops.py)
        swap_recurrent(model)
    except RuntimeError as exc:
        return {name: {"error": f"{type(exc).__name__}: {exc}"} for name in (variants or {"default": {}})}
    with torch.device(device):
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in call_get_inputs(problem)]
    varying = _varying_sizes(problem)
    captured = {}
    for name, options in (variants or {"default": {}}).items():
        started = time.perf_counter()
        inductors, own = own_options(options)
        own = {**TEMPLATE_DECOMPOSITIONS, **own} if templates else own
        try:
            with inductor_config.patch(flat_options(inductors)), inductor_benchmarks_shared(gpu_lock):
                got = _first_that_converts(model, inputs, device, spec, dynamic, gpu_lock,
                                           autotune_up_to if name == "default" and templates else None, own)
                if "specialised" in got:  # only sizes that change with the problem's sizes bake it
                    got["specialised"] = [s for s in got["specialised"] if int(s.rsplit(" = ", 1)[1]) in varying]
                captured[name] = {**got, "templates": templates, "tf32": tf32, "options": options}
        except Exception as exc:  # noqa: BLE001 - one variant Inductor cannot build leaves the others
            captured[name] = {"error": f"{type(exc).__name__}: {exc}"[-2000:]}
        captured[name].update(seconds=round(time.perf_counter() - started, 2), finished_at=time.time())
        if done is not None:
            done(captured)
    return captured


def _varying_sizes(problem) -> set[int]:
    """The values of the problem's size constants that other sizes change (those set for it, and the file's integers
    of at least fitness.problems.sizes.MIN_SHRINKABLE, also in its lists and tuples of sizes; not kernel sizes, strides,
    a 3 of RGB channels)."""
    from fitness.problems.sizes import MIN_SHRINKABLE

    return {x for k, v in problem.sizes.items() for x in (v if isinstance(v, (list, tuple)) else [v])
            if type(x) is int and (k in problem.spec.sizes or x >= MIN_SHRINKABLE)}


def _first_that_converts(model, inputs, device: str, spec, dynamic: bool, gpu_lock: str | None = None,
                         autotune_up_to: int | None = None,
                         decompositions: dict | None = None) -> dict:
    """The first of these captures that Inductor builds and the converter converts: with dynamic shapes (where
    asked), then the sizes as literals. The last is returned whatever the converter makes of it; ``fell_back`` says
    why each earlier one was not kept, and how long it took. Convolutions are always left to the library
    (``LIBRARY_CONVOLUTIONS``, also under a variant's max-autotune and with templates): the converter
    puts kernelevo's own convolution in their place (``convolutions.py``), and no conv template is autotuned."""
    import torch._inductor.config as inductor_config

    from kernelevo.seeds.inductor.convert import convert

    attempts = [True, False] if dynamic else [False]
    why = []
    for index, dynamic_shapes in enumerate(attempts):
        last, started = index == len(attempts) - 1, time.perf_counter()
        try:
            with inductor_config.patch(LIBRARY_CONVOLUTIONS):
                got = _capture_one(model, inputs, device, dynamic=dynamic_shapes, gpu_lock=gpu_lock,
                                   autotune_up_to=autotune_up_to, decompositions=decompositions)
            if not last:
                convert(got, Path(spec.path).read_text(), spec.name, triton_convolutions=True)
            return {**got, **({"fell_back": why} if why else {})}
        except Exception as exc:  # noqa: BLE001 - the next capture may still make a seed
            if last:
                raise
            what = "dynamic shapes" if dynamic_shapes else "static shapes"
            why.append(f"{what}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]} "
                       f"({time.perf_counter() - started:.0f} s)")  # where a long capture's time went
    raise AssertionError("unreachable: the last attempt returns or raises")


@contextlib.contextmanager
def _shapes(dynamic: bool):
    """Dynamic shapes where asked: every size of the inputs and parameters a symbol of its own (no duck sizing:
    two sizes equal at the captured sizes need not be equal at others)."""
    if not dynamic:
        yield
        return
    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config

    with dynamo_config.patch(force_parameter_static_shapes=False, specialize_float=True), \
            fx_config.patch(use_duck_shape=False):
        yield


@contextlib.contextmanager
def _logging_outside_the_graph():
    """Dynamo runs a forward's warnings and prints after the graph instead of breaking it: nn.InstanceNorm2d warns
    when its input's channels are not its num_features (level2/28), which broke the one graph the capture needs."""
    import warnings

    import torch._dynamo.config as dynamo_config

    with dynamo_config.patch(reorderable_logging_functions={print, warnings.warn}):
        yield


def _size_args(graph_module, mapping: list[dict]) -> tuple[list[dict], list[str]]:
    """`mapping` (``_arg_map``) with each size argument of a dynamic graph (a SymInt placeholder) said to be a size
    of one of the graph's tensor arguments (``{"kind": "size", "of": position, "dim": d}``), and the sizes over 1
    that Dynamo kept as literals all the same (``ln.weight dim 0 = 16``: specialised, so baked into the code)."""
    import torch

    placeholders = [n.meta.get("example_value") for n in graph_module.graph.nodes if n.op == "placeholder"]
    shapes = [[str(d) for d in v.shape] if isinstance(v, torch.Tensor) else None for v in placeholders]
    for position, value in enumerate(placeholders):
        if isinstance(value, torch.SymInt):
            found = next(((j, d) for j, shape in enumerate(shapes) if shape for d, s in enumerate(shape)
                          if s == str(value)), None)
            if found is None:
                raise RuntimeError(f"the size argument {value} of Inductor's graph is no tensor argument's size")
            mapping[position] = {"kind": "size", "of": found[0], "dim": found[1]}
    static = [f"{arg['name'] if 'name' in arg else 'input %d' % arg.get('index', -1)} dim {d} = {size}"
              for arg, shape in zip(mapping, shapes) if shape for d, size in enumerate(shape)
              if size.isdigit() and int(size) > 1]
    return mapping, static


def _specialised(code: str, mapping: list[dict], static: list[str]) -> list[str]:
    """`static` (the literal sizes of Dynamo's graph) and those Inductor's code asserts its arguments have as
    literals (``assert_size_stride(arg0_1, (128, 128), ...)``: guards specialised them while compiling)."""
    import ast

    from kernelevo.core import pyast

    call = next((n for n in ast.walk(pyast.parse(code)) if isinstance(n, ast.FunctionDef) and n.name == "call"), None)
    unpack = call.body[0] if call is not None and call.body else None
    names = [ast.unparse(e) for e in unpack.targets[0].elts] if isinstance(unpack, ast.Assign) and \
        isinstance(unpack.targets[0], ast.Tuple) else []
    found = list(static)
    for node in ast.walk(call) if call is not None else []:
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("assert_size_stride") and \
                len(node.args) >= 2 and isinstance(node.args[1], ast.Tuple) and ast.unparse(node.args[0]) in names:
            arg = mapping[names.index(ast.unparse(node.args[0]))] if len(mapping) == len(names) else {}
            who = arg.get("name") or f"input {arg.get('index', '?')}"
            found += [f"{who} dim {d} = {e.value}" for d, e in enumerate(node.args[1].elts)
                      if isinstance(e, ast.Constant) and isinstance(e.value, int) and e.value > 1]
    return list(dict.fromkeys(found))


def _code_of(compiled, inputs) -> list[str]:
    """Inductor's output modules for a call of `compiled`, nothing compiled or run (torch's ``get_code``, which
    fails after the code is written where dynamic shapes meet its stand-in module)."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    codes: list[str] = []

    def compile_to_module(graph):
        codes.append(graph.codegen()[0].value)
        raise _Written()

    with mock.patch.object(GraphLowering, "compile_to_module", compile_to_module):
        try:
            compiled(*inputs)
        except Exception as exc:  # noqa: BLE001 - ours, wrapped by Dynamo's and Inductor's own errors
            if not codes:
                raise
            del exc
    return codes


class _Written(Exception):
    """Raised once Inductor's code is written: nothing is compiled or run."""


def _capture_one(model, inputs, device: str, dynamic: bool = False, gpu_lock: str | None = None,
                 autotune_up_to: int | None = None, decompositions: dict | None = None) -> dict:
    import torch
    import torch._inductor.config as inductor_config
    import triton
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    from fitness.common.gpu_lock import shared
    from kernelevo.seeds.inductor.decompositions import capture_decompositions, slow_paths

    seen: dict = {}

    def backend(graph_module, example_inputs):
        seen["args"] = _arg_map(model, inputs, example_inputs, dynamic)
        if dynamic:
            seen["args"], seen["static"] = _size_args(graph_module, seen["args"])
        seen["choices"] = present(template_choices(graph_module, autotune_up_to), inductor_config)
        seen["calls"], seen["shapes"] = template_calls(graph_module), template_shapes(graph_module)
        with inductor_config.patch(seen["choices"]):
            return compile_fx(graph_module, example_inputs,
                              decompositions=capture_decompositions(**(decompositions or {})))

    torch._dynamo.reset()
    with torch.no_grad(), _shapes(dynamic), _logging_outside_the_graph(), slow_paths():
        with shared(gpu_lock):
            reference = model(*inputs)
        compiled = torch.compile(model, backend=backend, fullgraph=True, dynamic=dynamic or None)
        # on a GPU the compiled model runs once (Inductor autotunes its kernels); the interpreter only generates
        codes = _code_of(compiled, inputs) if device == "cpu" else run_and_get_code(compiled, *inputs)[1]
    if not codes:
        raise RuntimeError("torch.compile generated no code for this problem")
    code = codes[0]
    kernels = {}
    for name, heuristic in kernel_configs(code).items():
        configs = [config_dict(c) for c in heuristic.configs]
        picked = picked_config(name)
        kernels[name] = {"configs": [picked] + [c for c in configs if c != picked] if picked else configs,
                         "autotuned": picked is not None}
    return {"code": code, "args": seen.get("args", []), "kernels": kernels,
            "single_output": isinstance(reference, torch.Tensor), "outputs": _count(reference), "dynamic": dynamic,
            **({"specialised": _specialised(code, seen.get("args", []), seen.get("static", []))} if dynamic else {}),
            **({"template_configs": f"first only (more than {autotune_up_to} distinct matmuls and convolutions)",
                "template_calls": seen["calls"], "template_shapes": seen["shapes"]} if seen.get("choices") else {}),
            "versions": {"torch": torch.__version__, "triton": triton.__version__}, "device": device}


def _count(reference) -> int | None:
    """How many values forward returns (Inductor's call() may return more: the new values of tensor attributes
    forward assigns, which Dynamo sets on the module)."""
    import torch

    return 1 if isinstance(reference, torch.Tensor) else len(reference) if isinstance(reference, (tuple, list)) \
        else None


def main() -> None:
    from fitness.common.atomic import write_atomic
    from fitness.common.lifeline import arm

    arm()  # dies with the run that started it (fitness.common.lifeline), even a killed one
    spec_path, out_path, device = sys.argv[1:4]
    flags = sys.argv[4:]
    with open(spec_path) as fh:
        spec = json.load(fh)
    variants_file = next((f.split("=", 1)[1] for f in flags if f.startswith("variants=")), None)
    variants = json.loads(Path(variants_file).read_text()) if variants_file else None
    write = lambda captured: write_atomic(out_path, json.dumps(captured))  # noqa: E731 - whole, after each capture
    gpu_lock = next((f.split("=", 1)[1] for f in flags if f.startswith("gpu_lock=")), None)
    up_to = next((int(f.split("=", 1)[1]) for f in flags if f.startswith("autotune_up_to=")), None)
    write(capture(spec, device, templates="templates" in flags, tf32="tf32" in flags, variants=variants,
                  dynamic="dynamic" in flags, done=write, gpu_lock=gpu_lock, autotune_up_to=up_to))


if __name__ == "__main__":
    main()
