"""Inductor's options for seeds made of its GEMM and convolution templates (policy ``triton`` on a GPU), read by the
capture process (``capture.py``) and the seed cache's key (``cache.py``). No torch import."""
from __future__ import annotations

import functools

# Inductor's options for `templates`: matmuls as its Triton GEMM templates only. Without num_decompose_k_splits=0 a
# matmul whose K is 32 times M and N (level1/4's matrix-vector product, level1/6's K=524288) is autotuned against
# "decompose_k" too, a split-K subgraph whose batched matmul stays a library call (torch.bmm_dtype) with no Triton
# form here; the GEMM template with its whole K is a seed, slow or not, that the search can start from.
# Convolutions are never Inductor's Triton conv templates: every one stays a library call, which the converter
# makes kernelevo's own convolution (convolutions.py) under policy triton. Every capture.
LIBRARY_CONVOLUTIONS = {"max_autotune_conv_backends": "ATEN"}
# With templates (policy triton on a GPU) also no layout_optimization, so kernelevo's convolution gets the tensors as
# the model has them: Inductor's copies of a convolution's input and weight to channels-last and of its output back
# were 3 of the 4 kernels of level1/63's seed (conv_nd makes its own copy where its CHANNELS_LAST asks). Without
# templates (policy kernelbench) the library's convolution stays, with the copies, as torch.compile runs it. Part
# of the seed cache's key, so captures made otherwise miss.
TEMPLATE_OPTIONS = {"max_autotune_gemm": True, "max_autotune_gemm_backends": "TRITON",
                    "triton.num_decompose_k_splits": 0, "layout_optimization": False, **LIBRARY_CONVOLUTIONS}

# The capture's own decompositions with templates (decompositions.py): matmuls with a long K split over parts that
# give every SM two output tiles, each part a program of a batched GEMM template (Inductor's decompose_k, disabled
# above, would make that batched product a library call).
TEMPLATE_DECOMPOSITIONS = {"split_k_waves": 2}


def template_key() -> dict:
    """What the seed cache's key holds of a capture with templates: Inductor's options and the capture's own."""
    return {**TEMPLATE_OPTIONS, "decompositions": TEMPLATE_DECOMPOSITIONS}


# Dynamo's calls that Inductor lowers to a GEMM or convolution template (by the callee's name)
TEMPLATE_CALLS = frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "conv1d", "conv2d",
                            "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution"})


def _template_nodes(graph_module) -> list:
    return [node for node in graph_module.graph.nodes if node.op in ("call_function", "call_method")
            and getattr(node.target, "__name__", node.target) in TEMPLATE_CALLS]


def template_calls(graph_module) -> int:
    """How many of the matmuls and convolutions of Dynamo's graph `graph_module` Inductor may lower to its templates."""
    return len(_template_nodes(graph_module))


def template_shapes(graph_module) -> int:
    """How many distinct ones (the operator, its tensors' shapes, strides and dtypes, its other arguments): Inductor
    benchmarks a template's configurations once per distinct call and reads the timings of the others from its
    autotuning cache, so an RNN's 256 unrolled steps (level3/34: 512 Linears of 2 shapes) cost two autotunings."""
    def described(value):
        meta = getattr(value, "meta", None)
        if meta is None:
            return repr(value) if not isinstance(value, (list, tuple)) else tuple(described(v) for v in value)
        tensor = meta.get("example_value", meta.get("val"))
        if not hasattr(tensor, "stride"):  # not known: the node itself, so the call counts as distinct
            return value.name
        return tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype)

    return len({(str(getattr(node.target, "__name__", node.target)), described(node.args),
                 described(tuple(sorted(node.kwargs.items())))) for node in _template_nodes(graph_module)})


def template_choices(graph_module, autotune_up_to: int | None) -> dict:
    """Inductor's options for compiling `graph_module` in the default capture: none, or, past `autotune_up_to`
    distinct matmuls and convolutions (``template_shapes``), one configuration per template
    (``test_configs.max_mm_configs``), which leaves Inductor one choice to take without benchmarking."""
    if autotune_up_to is None or template_shapes(graph_module) <= autotune_up_to:
        return {}
    return {"test_configs.max_mm_configs": 1}


def present(options: dict, config) -> dict:
    """Those of `options` (dotted names: ``triton.num_decompose_k_splits``) that Inductor's `config` module has: one
    an older torch lacks is a choice it does not offer or a limit it does not know, so the capture goes on without."""
    def has(key: str) -> bool:
        *path, name = key.split(".")
        return hasattr(functools.reduce(getattr, path, config), name)

    return {key: value for key, value in options.items() if has(key)}


def stale(captured: dict, autotune_up_to: int | None) -> str:
    """Why a cached capture made with one configuration per template (``template_configs``) is not what the settings
    ask for now ('' where it is): its graph's distinct matmuls and convolutions are no longer more than
    `autotune_up_to`, or it was made when every call counted (no ``template_shapes``: level3/34's 512 calls are 2)."""
    shapes = captured.get("template_shapes")
    if not captured.get("template_configs"):
        return ""
    if shapes is None:
        return (f"its cached capture took one configuration per template when every one of its "
                f"{captured.get('template_calls')} matmuls and convolutions counted; distinct ones count now")
    if autotune_up_to is not None and shapes > autotune_up_to:
        return ""
    return (f"its cached capture took one configuration per template ({shapes} distinct matmuls and convolutions); "
            f"inductor.autotune_templates_up_to={'null' if autotune_up_to is None else autotune_up_to} autotunes "
            f"them now")
