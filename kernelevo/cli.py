"""The `kernelevo` command: a Hydra app per sub-command (`kernelevo evaluate ...`), and `kernelevo list`.

Each sub-command has its own config file in ``conf/`` (``kernelevo.config``) and its own task function; everything after
the sub-command name is Hydra overrides (``key=value``, ``group=option``, ``--multirun``, ``--cfg job``). The command
line is composed once into the command's config, its overrides checked against it (``kernelevo.validate``), and the
config turned once into the command's typed plan, checked (``Command.plan``, ``kernelevo.plans``), before Hydra starts;
so are the places it writes (``kernelevo.locations``): a command that fails them has written nothing. A single job then
runs on that config and plan (Hydra's ``run_job``: nothing is composed again); a sweep (``--multirun``), or
``--cfg``/``--help``, goes through ``hydra.main``, whose launcher composes each job's config, which the job plans.
Ctrl-C ends a command in one line, exit code 130. ``--seeds N`` repeats the searches over N search seeds: a bench's
``bench.seeds=N``, a run's multirun over ``search.seed`` (their tables give confidence intervals).
"""
from __future__ import annotations

import functools
import sys

import hydra

from kernelevo.config import CONF_DIR  # registers the schema, the groups and the resolvers (${stem:...}) first
from kernelevo.core.errors import KernelevoError
from kernelevo.core.log import configure as configure_logging
from fitness.common.lifeline import arm
from evo.runs.failure import asked_file
from kernelevo.commands import COMMANDS, Failed, ask_failure_file, fail, failure_of, interrupted, record_failure
from kernelevo.listing import LISTS, print_list
from kernelevo.locations import check_locations, claim, own_folder, release
from kernelevo.validate import Validator, split_flags, wants_info

# Hydra's log file (commands.log, named after this module) opened at the first record logged, not at the start: a
# command that logs nothing leaves no empty file in its output directory
LOG_ONLY_WHEN_LOGGED = "++hydra.job_logging.handlers.file.delay=true"
USAGE = "usage: kernelevo {" + ",".join([*COMMANDS, "list"]) + "} [key=value ...]"
FAILED_JOBS: list[tuple[str, int]] = []  # the jobs of this command's sweep that failed: (directory, exit status)


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
        raise KernelevoError(f"--seeds is an option of kernelevo bench and kernelevo run, not of kernelevo {name}")
    if not given.isdigit() or int(given) < 1:
        raise KernelevoError(f"--seeds {given}: give the number of search seeds, a whole number of at least 1 (e.g. "
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
    to continue the run). A command that fails writes its failure's record where whoever started it asked
    (``evo.runs.failure.FAILURE_FILE``: a bench, for each of its runs)."""
    arm()  # a bench's search (started with fitness.common.lifeline's env): dies with the bench, even a killed one
    configure_logging()  # what the command tells as it works: "[kernelevo] ..." lines (kernelevo.core.log)
    ask_failure_file(asked_file())
    try:
        _main(argv)
    except KeyboardInterrupt:
        interrupted("kernelevo: interrupted")
    except (Failed, Exception) as exc:  # said, or a bug outside the job (one inside it: run_single records it)
        record_failure(failure_of(exc))
        raise


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") and len(argv) == 1:
        print(USAGE)
        for name, command in COMMANDS.items():
            print(f"  {name:10s} {command.help}")
        print(f"  {'list':10s} what there is to choose from: kernelevo list {{{','.join(LISTS)}}}")
        sys.exit(0 if argv else 2)
    name, args = argv[0], argv[1:]
    FAILED_JOBS.clear()
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
        own_logging = any("job_logging" in o for o in overrides)  # hydra/job_logging=...: the user's, as given
        validator = Validator(name, command.config)
        cfg, overrides = validator.check([*expand_problem_paths(overrides),
                                          *([] if own_logging else [LOG_ONLY_WHEN_LOGGED])],
                                         required=not wants_info(flags))
        if seeds is not None and name == "run":
            flags, overrides = seed_sweep(cfg.search.seed, seeds, flags, overrides)
        output_dir, multirun = validator.output_dir(flags)
        output_dir = output_dir if multirun else own_folder(name, cfg, output_dir)
        swept = next((o for o in overrides if is_sweep(o)), None)
        if swept is not None and not multirun:  # else Hydra's "Ambiguous value", after the directory was made
            key, _, value = swept.partition("=")
            raise KernelevoError(f"{swept}: a comma makes a sweep, which needs --multirun; for one value holding a "
                                 f"comma, quote it: {key}='{value}'")
        single = not flags and not multirun and output_dir is not None  # a sweep without --multirun: refused above
        held, pins, plan = None, [], None
        if not wants_info(flags):
            if single:  # the job's Hydra config, as the plan resolves it (the LLM reply cache in its directory)
                job_config(validator.composed, output_dir)
            plan = command.plan(cfg, overrides)
            if command.check is not None:
                command.check(plan)
            check_locations(name, cfg, output_dir, multirun)
            held, pins = claim(name, cfg, output_dir, multirun)  # the directory is this command's
            if command.claimed is not None:
                plan = claimed(command, plan, held)
    except KernelevoError as exc:  # a ConfigError, a command check's or a location's error naming the fix
        fail(str(exc))
    try:
        if single and plan is not None:
            run_single(command, validator, plan)
        else:
            sys.argv = [f"kernelevo {name}", *flags,
                        *[o for o in overrides if not pins or not o.startswith("hydra.run.dir=")], *pins,
                        *help_text(name, flags)]
            hydra.main(config_path=str(CONF_DIR), config_name=command.config, version_base="1.3")(in_job(command))()
            if FAILED_JOBS:  # the sweep ran every other job and its tables: the command says the failures
                print(f"kernelevo: error: {len(FAILED_JOBS)} job(s) of the sweep failed, each a row of its table: "
                      f"{', '.join(where for where, _ in FAILED_JOBS)}", file=sys.stderr)
                sys.exit(max(status for _, status in FAILED_JOBS))
    finally:
        release(held)


def claimed(command, plan, held):
    """The command's plan completed once it holds its directory; the directory given back when that fails."""
    try:
        return command.claimed(plan)
    except BaseException:
        release(held)
        raise


def is_sweep(override: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(override).is_sweep_override()


def job_config(config, output_dir) -> None:
    """`config` (a composed config with Hydra's node) made the one its job runs on: its output directory the one
    claimed (``${now:...}`` is not resolved again), and Hydra's config of the job set, as ``run_job`` sets it."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict, read_write

    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.run.dir = str(output_dir)
        config.hydra.runtime.output_dir = str(output_dir)
        if config.hydra.mode is None:
            config.hydra.mode = RunMode.RUN
    HydraConfig.instance().set_config(config)


def run_single(command, validator: Validator, plan) -> None:
    """Run the command's one job on the config the command line composed and its plan, as Hydra's ``run`` would,
    without composing the config again: its logging, its callbacks, its output directory (``run_job``)."""
    from hydra._internal.callbacks import Callbacks
    from hydra._internal.utils import run_and_report
    from hydra.core.utils import configure_log, run_job
    from hydra.types import HydraContext

    config = validator.composed
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)

    @functools.wraps(command.task)  # Hydra names the job (and its log) after the task's module
    def task(cfg):
        try:
            return command.task(cfg, plan)
        except Exception as exc:  # a bug: Hydra prints its traceback and exits 1, the record says what it was
            record_failure(failure_of(exc))
            raise

    def job():
        callbacks = Callbacks(config)
        callbacks.on_run_start(config=config, config_name=command.config)
        done = run_job(hydra_context=HydraContext(config_loader=validator.loader, callbacks=callbacks),
                       task_function=task, config=config, job_dir_key="hydra.run.dir", job_subdir_key=None)
        callbacks.on_run_end(config=config, config_name=command.config, job_return=done)
        return done.return_value  # the task's exception, raised again

    run_and_report(job)


def in_job(command):
    """A job of ``hydra.main`` (a sweep's): the command's task on the plan of the config Hydra composed for it. A job
    of a sweep that fails -- its error said, or an exception -- is its row in the sweep's tables (``job_failed``),
    and the sweep goes on with its other jobs."""
    @functools.wraps(command.task)  # Hydra names the job (and its log) after the task's module
    def task(cfg):
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        try:
            try:
                plan = command.plan(cfg, list(HydraConfig.get().overrides.task))
                plan = plan if command.claimed is None else command.claimed(plan)
            except KernelevoError as exc:
                fail(str(exc))
            return command.task(cfg, plan)
        except (Failed, Exception) as exc:
            if HydraConfig.get().mode != RunMode.MULTIRUN:
                raise
            job_failed(cfg, exc)
    return task


def job_failed(cfg, exc: BaseException) -> None:
    """A failed job of a sweep recorded in its directory (``evo.runs.failure.RunFailure.keep``: its row in the
    sweep's tables) and kept for the command's exit status; an exception other than a said error is also told with
    its traceback."""
    import traceback
    from pathlib import Path

    from hydra.core.hydra_config import HydraConfig

    from fitness.problems.problem import resolve_problem

    if not isinstance(exc, Failed):
        traceback.print_exception(exc, file=sys.stderr)
    where = Path(HydraConfig.get().runtime.output_dir)
    name = str(cfg.problem.name) if "problem" in cfg and "name" in cfg.problem else ""
    try:
        problem = resolve_problem(name).name if name else ""
    except KernelevoError:
        problem = name
    failure = failure_of(exc, problem)
    failure.keep(where)
    FAILED_JOBS.append((str(where), failure.status))


if __name__ == "__main__":
    main()
