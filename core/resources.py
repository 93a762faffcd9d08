"""A package's data folder (its YAML files), found without importing the package.

``importlib.resources.files("conf")`` would import ``conf``, whose ``__init__`` registers the schema and the
plug-ins and so imports every layer: the judge and the operators read ``conf/``'s YAML files through this instead,
which finds the package's spec and never runs its ``__init__``."""
from __future__ import annotations

import importlib.resources
import os
import time
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable  # Python 3.11+; annotations only


def package_folder(package: str) -> Traversable:
    """The folder of `package` (a top-level package: a dotted name would import its parents)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(f"no package {package!r} to read data from: is kernelevo installed "
                                  f"(pip install -e .) or the repository on PYTHONPATH?")
    return importlib.resources.files(importlib.util.module_from_spec(spec))


def process_started() -> float | None:
    """When this process started (seconds since the epoch, as time.time()), from Linux's /proc; None elsewhere. Lets
    a run say how long its start (the interpreter, imports, the config) took before its own first line ran."""
    try:
        stat = open("/proc/self/stat").read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime: clock ticks after boot
        up = float(open("/proc/uptime").read().split()[0])  # seconds after boot, now
        return time.time() - (up - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
