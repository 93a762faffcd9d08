"""The launch configurations of the kernels in Inductor's output code, read in the capture process (``capture.py``):
each kernel's candidate configurations (its heuristic object) and the one Inductor's autotuning kept."""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path


def kernel_configs(code: str) -> dict:
    """Each kernel's heuristic object, built by running its source as Inductor's async_compile would."""
    from kernelevo.core import pyast
    from kernelevo.seeds.inductor.convert import kernel_sources

    kernels = {}
    with tempfile.TemporaryDirectory(prefix="kernelevo-capture-") as folder:
        for index, (name, source) in enumerate(kernel_sources(pyast.parse(code))):
            path = Path(folder) / f"inductor_kernel_{index}.py"  # @triton.jit reads its source from a file
            path.write_text(source)
            loader = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)  # trusted: Inductor's own output
            kernels[name] = getattr(module, name)
    return kernels


def picked_config(name: str) -> dict | None:
    """The configuration Inductor's autotuning kept for kernel `name` in the module it loaded and ran, if any."""
    from torch._inductor.codecache import PyCodeCache

    for module in reversed(list(getattr(PyCodeCache, "modules", []))):
        launchers = getattr(getattr(module, name, None), "launchers", None)
        if launchers:
            return config_dict(launchers[0].config)
    return None


def config_dict(config) -> dict:
    return {"kwargs": dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}
