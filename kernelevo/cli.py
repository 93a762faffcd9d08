"""The `kernelevo` command: a Hydra app per sub-command (`kernelevo evaluate ...`).

Each sub-command has its own config file in ``conf/`` and its own task function; everything after the
sub-command name is Hydra overrides (``key=value``, ``group=option``, ``--multirun``, ``--cfg job``).
"""
from __future__ import annotations

import sys

import hydra

from kernelevo.commands import COMMANDS

USAGE = "usage: kernelevo {" + ",".join(COMMANDS) + "} [key=value ...]"


def expand_problem_paths(overrides: list[str]) -> list[str]:
    """`problem=PATH` (a KernelBench file rather than a bundled name) becomes `problem=file problem.name=PATH`."""
    expanded = []
    for item in overrides:
        key, _, value = item.partition("=")
        if key == "problem" and (value.endswith(".py") or "/" in value):
            expanded += ["problem=file", f"problem.name={value}"]
        else:
            expanded.append(item)
    return expanded


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") and len(argv) == 1:
        print(USAGE)
        for name, command in COMMANDS.items():
            print(f"  {name:10s} {command.help}")
        sys.exit(0 if argv else 2)
    name, overrides = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"kernelevo: unknown command {name!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)
    command = COMMANDS[name]
    sys.argv = [f"kernelevo {name}", *expand_problem_paths(overrides)]
    hydra.main(config_path="pkg://conf", config_name=command.config, version_base="1.3")(command.task)()


if __name__ == "__main__":
    main()
