"""The `kernelevo` command: a Hydra app per sub-command (`kernelevo evaluate ...`), and `kernelevo list`.

Each sub-command has its own config file in ``conf/`` and its own task function; everything after the
sub-command name is Hydra overrides (``key=value``, ``group=option``, ``--multirun``, ``--cfg job``). The overrides
are checked against the command's composed config, and the command's own checks run, before Hydra starts
(``kernelevo.validate``), and so are the places it writes (``kernelevo.locations``): a command that fails them has
written nothing. Ctrl-C ends a command in one line, exit code 130. ``--seeds N`` repeats the searches over N search
seeds: a bench's ``bench.seeds=N``, a run's multirun over ``search.seed`` (their tables give confidence intervals).
"""
from __future__ import annotations

import sys

import hydra

import conf  # noqa: F401 - registers the config's resolvers (${stem:...}) before Hydra resolves anything
from core.log import configure as configure_logging
from fitness.lifeline import arm
from kernelevo.commands import COMMANDS, fail, interrupted
from kernelevo.listing import LISTS, print_list
from kernelevo.locations import check_locations, claim, release
from kernelevo.validate import Validator, split_flags, wants_info

# Hydra's log file (commands.log, named after this module) opened at the first record logged, not at the start: a
# command that logs nothing leaves no empty file in its output directory
LOG_ONLY_WHEN_LOGGED = "++hydra.job_logging.handlers.file.delay=true"
USAGE = "usage: kernelevo {" + ",".join([*COMMANDS, "list"]) + "} [key=value ...]"


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


def seeds_option(name: str, args: list[str]) -> tuple[list[str], int | None]:
    """`--seeds N` taken out of the command line of `bench` or `run`: (the other arguments, N or None)."""
    at = next((i for i, arg in enumerate(args) if arg == "--seeds" or arg.startswith("--seeds=")), None)
    if at is None:
        return args, None
    joined = args[at].startswith("--seeds=")  # --seeds=3 as well as --seeds 3
    given = args[at].partition("=")[2] if joined else args[at + 1] if at + 1 < len(args) else ""
    if name not in ("bench", "run"):
        raise ValueError(f"--seeds is an option of kernelevo bench and kernelevo run, not of kernelevo {name}")
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"--seeds {given}: give the number of search seeds, a whole number of at least 1 (e.g. "
                         f"--seeds 3)")
    return args[:at] + args[at + (1 if joined else 2):], int(given)


def seed_sweep(first: int, seeds: int, flags: list[str], overrides: list[str]) -> tuple[list, list]:
    """(flags, overrides) of `kernelevo run --seeds N`: a multirun over N search seeds from the run's own on
    (``search.seed``, as a bench's seeds are)."""
    kept = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] != "search.seed"]
    multirun = [] if any(flag in ("--multirun", "-m") for flag in flags) else ["--multirun"]
    return [*multirun, *flags], [*kept, "search.seed=" + ",".join(str(first + i) for i in range(seeds))]


def help_text(name: str, flags: list[str]) -> list[str]:
    """`kernelevo NAME --help`: Hydra's help page opening with what the command does (Hydra's own header names the
    module and says it "is powered by Hydra"), its footer how to read the keys' meanings."""
    if not any(flag in ("--help", "-h") for flag in flags):
        return []
    quote = lambda text: "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"  # noqa: E731 - Hydra's quoting
    header = f"kernelevo {name}: {COMMANDS[name].help}\nkeys are set as key=value; groups as group=option\n"
    footer = ("every key's meaning and default: docs/configuration.md; the composed config: kernelevo "
              f"{name} --cfg job")
    return [f"hydra.help.header={quote(header)}", f"hydra.help.footer={quote(footer)}"]


def main(argv: list[str] | None = None) -> None:
    """The command line; Ctrl-C ends in one line and exit code 130 (`run` and `resume` catch it first, to say how
    to continue the run)."""
    arm()  # a bench's search (started with fitness.lifeline's env): dies with the bench, even a killed one
    configure_logging()  # what the command tells as it works: "[kernelevo] ..." lines (core.log)
    try:
        _main(argv)
    except KeyboardInterrupt:
        interrupted("kernelevo: interrupted")


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") and len(argv) == 1:
        print(USAGE)
        for name, command in COMMANDS.items():
            print(f"  {name:10s} {command.help}")
        print(f"  {'list':10s} what there is to choose from: kernelevo list {{{','.join(LISTS)}}}")
        sys.exit(0 if argv else 2)
    name, args = argv[0], argv[1:]
    if name == "list":
        sys.exit(print_list(args))
    if name not in COMMANDS:
        print(f"kernelevo: unknown command {name!r}\n{USAGE}", file=sys.stderr)
        sys.exit(2)
    command = COMMANDS[name]
    try:
        args, seeds = seeds_option(name, args)
        flags, overrides = split_flags(args)
        if seeds is not None and name == "bench":
            overrides.append(f"bench.seeds={seeds}")
        validator = Validator(name, command.config)
        cfg, overrides = validator.check(expand_problem_paths(overrides))
        if seeds is not None and name == "run":
            flags, overrides = seed_sweep(cfg.search.seed, seeds, flags, overrides)
        held, pins = None, []
        if not wants_info(flags):
            if command.check is not None:
                command.check(cfg)
            check_locations(name, cfg, *validator.output_dir(flags))
            held, pins = claim(name, cfg, *validator.output_dir(flags))  # the directory is this command's
    except ValueError as exc:  # a ConfigError, a command check's or a location's error naming the fix
        fail(str(exc))
    own_logging = any("job_logging" in o for o in overrides)  # hydra/job_logging=...: the user's handlers as given
    sys.argv = [f"kernelevo {name}", *flags, *[o for o in overrides if not pins or not o.startswith("hydra.run.dir=")],
                *pins, *help_text(name, flags), *([] if own_logging else [LOG_ONLY_WHEN_LOGGED])]
    try:
        hydra.main(config_path="pkg://conf", config_name=command.config, version_base="1.3")(command.task)()
    finally:
        release(held)


if __name__ == "__main__":
    main()
