"""`uv pip install ARGS` with what this machine's pip configuration says: `python scripts/uv_pip_install.py ARGS`.

uv reads no pip configuration (pip.conf, PIP_* variables), so without this `scripts/setup.sh` would install from PyPI
only: not the CPU build of torch that a machine keeps in a `find-links` folder, not its local indexes, and not its
constraint files. The settings are pip's own view of them (`pip config list`: every configuration file and the PIP_*
variables), for the `install` command in pip's order of precedence: a variable over an `[install]` section over a
`[global]` one; pip's `cert` becomes uv's SSL_CERT_FILE. uv's `unsafe-best-match` picks the best version over all the
indexes, as pip does (uv's default takes a package from the first index that has it). Run with the environment's
Python, whose `bin/` holds uv and whose packages uv installs.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

# pip's option -> uv's; each of these takes a whitespace-separated list in pip's configuration
LISTS = {"find-links": "--find-links", "extra-index-url": "--extra-index-url", "constraint": "--constraint"}
SINGLE = {"index-url": "--index-url"}
SECTIONS = (":env:", "install", "global")  # highest precedence first
TRUE = {"1", "true", "yes", "on"}


def pip_settings() -> dict[str, str]:
    """`section.key -> value` from `pip config list` (its lines read `key='value'`)."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], check=True, capture_output=True, text=True
    ).stdout
    settings = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            settings[key] = ast.literal_eval(value)
    return settings


def effective(settings: dict[str, str], name: str) -> str | None:
    return next((settings[f"{s}.{name}"] for s in SECTIONS if f"{s}.{name}" in settings), None)


def uv_options(settings: dict[str, str]) -> list[str]:
    options = ["--index-strategy", "unsafe-best-match"]
    for name, flag in SINGLE.items():
        if (value := effective(settings, name)) is not None:
            options += [flag, value]
    for name, flag in LISTS.items():
        for value in (effective(settings, name) or "").split():
            options += [flag, value]
    if (effective(settings, "no-index") or "").lower() in TRUE:
        options.append("--no-index")
    return options


if __name__ == "__main__":
    settings = pip_settings()
    if (cert := effective(settings, "cert")) and "SSL_CERT_FILE" not in os.environ:
        os.environ["SSL_CERT_FILE"] = cert
    uv = str(Path(sys.executable).parent / "uv")
    os.execv(uv, [uv, "pip", "install", "--python", sys.executable, *uv_options(settings), *sys.argv[1:]])
