"""Task functions behind the `kernelevo` sub-commands; each receives its composed Hydra config."""
from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig, OmegaConf

from fitness.lifeline import INTERRUPTED_EXIT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    config: str
    task: Callable
    help: str
    check: Callable | None = None  # checks on the composed config, run before Hydra writes anything


def fail(message: str, status: int = 2) -> None:
    print(f"kernelevo: error: {message}", file=sys.stderr)
    sys.exit(status)


INTERRUPTED = INTERRUPTED_EXIT  # the exit code of a command ended by Ctrl-C


def interrupted(line: str) -> None:
    """End a command that Ctrl-C interrupted: one line, exit code 130. Called once the interrupt has unwound the
    command (its `finally` blocks closed the store, the evaluators and their processes), so it leaves at once: a
    thread the interrupt left waiting must not hold the exit (one did, 1 run in 8); a second Ctrl-C meanwhile too."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(INTERRUPTED))
    from kernelevo.locations import CLAIMS

    for held in list(CLAIMS.values()):  # its directory given back (the kernel would drop the lock, not the file)
        held.release()
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(INTERRUPTED)


def _interrupted_run(run_dir: Path) -> None:
    from kernelevo.resuming import interrupted_run

    interrupted(interrupted_run(run_dir))


def _output_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def _out_path(out: str) -> Path:
    """A command's `out=`: an absolute path, or one relative to the command's output directory (made if missing)."""
    path = Path(out)
    path = path if path.is_absolute() else _output_dir() / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def check_evaluate(cfg: DictConfig) -> None:
    from fitness.from_config import check_fitness_config, read_candidate

    read_candidate(cfg.candidate, check_fitness_config(cfg))


def check_seed(cfg: DictConfig) -> None:
    from fitness.from_config import check_fitness_config

    check_fitness_config(cfg)


CHECKED: dict = {}  # the config `check_run` checked last (as YAML) -> what it built, for the `run` task of it


def check_run(cfg: DictConfig) -> None:
    from evo.run import check_run_config

    checked = check_run_config(cfg)
    check_llm(cfg, checked.operators)
    CHECKED.clear()  # one command line, one check: nothing a command refused later is kept for another
    CHECKED[OmegaConf.to_yaml(cfg)] = checked


def checked_run(cfg: DictConfig):
    """What `check_run` built from this config before Hydra started (the run's config is checked once); a job of a
    sweep with other values than the first, which the command line checked, is checked here."""
    from evo.run import check_run_config

    return CHECKED.pop(OmegaConf.to_yaml(cfg), None) or check_run_config(cfg)


def check_llm(cfg: DictConfig, operators: list, warn: bool = False) -> None:
    """The LLM the run would ask (``operators.llm.check``), checked as a user would: its key, its server, its model.
    `warn`: a failure is a printed line, not an error (a resume: the replies it needs may all be in the cache)."""
    from operators.llm.check import LLMCheckFailed, check_llm as check, uses_llm

    llm = OmegaConf.to_container(cfg.llm, resolve=True) if cfg.llm is not None else {}
    if not uses_llm(operators, llm, llm["initialise"] if llm else False):
        return
    try:
        line = check(llm)
    except LLMCheckFailed as exc:
        if not warn:
            raise
        line = f"warning: {exc} (replies in the LLM cache replay; failed calls in a row stop the run)"
    if line:
        log.info(f"{line}")


def llm_stop(run_dir: Path, stop_reason: str) -> None:
    """After a run that its LLM stopped (too many failed calls in a row): the resume command; an error (exit 1) when
    no LLM child was made in the whole run."""
    from evo.store import RunStore
    from operators.llm.ledger import UNAVAILABLE
    from operators.llm.operators import LLM_OPERATORS

    if not stop_reason.startswith(UNAVAILABLE):
        return
    store = RunStore(run_dir, create=False)
    made = sum(1 for ind in store.individuals() if ind.operator in {op.name for op in LLM_OPERATORS})
    store.close()
    then = f"fix it, then continue the run: kernelevo resume run_dir={run_dir}"
    if not made:
        fail(f"{stop_reason}; no LLM child was made: {then}", status=1)
    log.info(f"the LLM stopped the run after {made} LLM children: {then}")


def check_run_dir(cfg: DictConfig) -> None:
    """resume and report: run_dir must hold a run (nothing is created where there is none)."""
    from evo.store import RunStore

    RunStore.check_exists(Path(cfg.run_dir))


def check_bench(cfg: DictConfig) -> None:
    from evo.bench import select, with_seeds
    from evo.intervals import Bootstrap

    from kernelevo.benching import check_rerun

    problems = cfg.bench.problems
    tasks = with_seeds(select(cfg.bench.root, cfg.bench.level, OmegaConf.to_container(problems)
                              if OmegaConf.is_config(problems) else problems), cfg.bench.seeds, cfg.search.seed)
    Bootstrap.from_config(cfg.intervals)
    check_run(cfg)
    if cfg.bench.dir:  # its runs' settings against the command's (no bench.dir: a new one, nothing to compare)
        check_rerun(cfg, tasks, Path(cfg.bench.dir).expanduser().resolve())


def evaluate(cfg: DictConfig) -> None:
    """Evaluate one candidate (default: the problem's bundled seed) and print the verdict."""
    from fitness.from_config import build_evaluator, read_candidate

    try:
        evaluator = build_evaluator(cfg)
        source, label = read_candidate(cfg.candidate, evaluator.problem)
    except ValueError as exc:
        fail(str(exc))
    with evaluator:
        log.info(f"{evaluator.describe()}")
        result = evaluator.evaluate(source, label=label)
    print(result.summary(), flush=True)  # the verdict first: should the write fail after all, it is not lost
    try:
        out = _out_path(cfg.out)
        out.write_text(result.to_json())
    except OSError as exc:
        fail(f"the verdict above could not be written to out={cfg.out}: {exc}")
    print(f"result written to {out}")
    if not result.ok:
        sys.exit(1)


def seed(cfg: DictConfig) -> None:
    """Write the problem's seed converted from torch.compile's Triton kernels, without searching."""
    from fitness.evaluator import default_cache_dir
    from fitness.from_config import fitness_parts
    from seeds.inductor import inductor_seeds, policy_options, variants_from_config, write_seeds

    try:
        parts = fitness_parts(cfg)
        device, problem, policy = parts.device, parts.problem, parts.policy
        sources = inductor_seeds(problem, device, parts.profile.name, default_cache_dir(),
                                 variants=variants_from_config(cfg), **policy_options(policy))
    except ValueError as exc:  # SeedError included: it names what is missing and the ways out
        fail(str(exc))
    try:
        out = _out_path(cfg.out)
        written = write_seeds(sources, out.parent, out.name)  # the variants next to the seed
    except OSError as exc:  # out= was checked before anything was compiled: something changed since
        fail(f"the seed could not be written to out={cfg.out}: {exc}")
    for made_by, path in zip(sources, written):
        print(f"seed for {problem.name} ({made_by}; policy {policy.name}, {device}) written to {path}")
    print(f"evaluate one: kernelevo evaluate problem={cfg.problem.name} candidate={out}")


def run(cfg: DictConfig) -> None:
    """Evolve a faster kernel for the configured problem; the run directory is Hydra's output directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from evo.claim import Claim
    from evo.run import execute
    from kernelevo.locations import held, run_taken
    from operators.llm.ledger import LLMError

    run_dir, multirun = _output_dir(), HydraConfig.get().mode == RunMode.MULTIRUN
    own = held(run_dir)  # claimed before Hydra started; a job of --multirun claims its directory now
    try:
        own = own or Claim(run_dir, "wait for it to end, or start this sweep in another hydra.sweep.dir",
                           "kernelevo run").__enter__()
    except ValueError as exc:
        fail(str(exc))
    try:
        taken = run_taken(run_dir, "hydra.sweep.dir" if multirun else "hydra.run.dir")  # known before Hydra: checked
        if taken is not None:
            fail(taken)
        swept = {o.lstrip("+~").split("=", 1)[0] for o in HydraConfig.get().overrides.task} if multirun else set()
        try:  # runs of a sweep over search seeds (--seeds N) name theirs in every progress line
            summary = execute(cfg, run_dir, checked_run(cfg),
                              tag=f"seed {cfg.search.seed}" if "search.seed" in swept else "")
        except ValueError as exc:
            fail(str(exc) + _discarded(run_dir, own))
        except LLMError as exc:  # the initialiser's call, before the search (no child is made without it)
            fail(f"{exc}; fix it, then: kernelevo resume run_dir={run_dir}", status=1)
        except KeyboardInterrupt:
            _interrupted_run(run_dir)
        llm_stop(run_dir, summary.stop_reason)
    finally:
        if not held(run_dir):  # a job's own claim (the command line releases the one it made)
            own.release()


def _discarded(run_dir: Path, own) -> str:
    """After a run failed: when it had evaluated nothing (a bad problem, a failed seed capture), the directory as
    it was before the run (none, when the run made it), so that nothing blocks running it there again; what to add
    to the error saying so ('' when the run kept its evaluations)."""
    from evo.store import DB_NAME, RunStore

    if (run_dir / DB_NAME).is_file():
        store = RunStore(run_dir, create=False)
        try:
            evaluated = store.evaluation_count()
        finally:
            store.close()
        if evaluated:
            return ""
    own.undo()
    return f" (nothing evaluated: nothing kept in {run_dir}; run it again there once fixed)"


def bench(cfg: DictConfig) -> None:
    """One search per problem of a KernelBench selection, spread over the GPUs; the table over all of them."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import instantiate

    from evo.bench import BenchError, BenchInterrupted, execute_bench, select, with_seeds
    from evo.bench_report import bench_reports, console_table, row_line, summary_lines, write_bench_report
    from evo.intervals import Bootstrap
    from kernelevo.benching import OWN, check_rerun, interrupted_line, interrupted_rows, kept_rows, set_aside

    own = (*(f"{key}." for key in OWN), "bench/", "problem")  # the bench's own settings; the rest: every run
    overrides = tuple(o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(own))
    problems = cfg.bench.problems
    problems = OmegaConf.to_container(problems) if OmegaConf.is_config(problems) else problems
    try:
        tasks = with_seeds(select(cfg.bench.root, cfg.bench.level, problems, overrides), cfg.bench.seeds,
                           cfg.search.seed)
        boot = Bootstrap.from_config(cfg.intervals)
        backend = instantiate(cfg.bench.backend)
    except ValueError as exc:
        fail(str(exc))
    bench_dir = Path(cfg.bench.dir).expanduser().resolve() if cfg.bench.dir else _output_dir().resolve()
    try:  # again, now that the bench directory is this command's
        replaced = set_aside(bench_dir, list(check_rerun(cfg, tasks, bench_dir)))
    except ValueError as exc:
        fail(str(exc))
    if replaced is not None:
        print(f"[bench] bench.rerun=changed: the runs made with other settings are kept under {replaced}; their "
              f"problems run again", flush=True)
    stopped = ""
    try:  # every finished problem's row is saved as it comes: an error here loses none
        rows = execute_bench(tasks, backend, bench_dir, on_row=lambda row: print(row_line(row), flush=True))
    except BenchError as exc:
        fail(str(exc))
    except BenchInterrupted as exc:  # Ctrl-C: its searches ended at their checkpoints; the table of what there is
        rows = interrupted_rows(tasks, exc.rows, bench_dir)
        stopped = interrupted_line(rows, bench_dir)
    except KeyboardInterrupt:
        interrupted(f"kernelevo: interrupted; {bench_dir} keeps every finished problem: continue with the same "
                    f"command and bench.dir={bench_dir}")
    kept = kept_rows(bench_dir, tasks)  # problems this selection leaves out: their rows stay in the table
    if kept:
        print(f"[bench] {bench_dir} keeps {len(kept)} more problem{'s' if len(kept) > 1 else ''}, outside this "
              f"selection, in its table: {', '.join(r.label for r in kept)}", flush=True)
        rows = [*rows, *kept]
    seeds = f" x {cfg.bench.seeds} search seeds" if cfg.bench.seeds > 1 else ""
    title = cfg.bench.title or f"kernelevo bench: {len({r.name for r in rows})} problems{seeds}"
    summary = write_bench_report(bench_dir, rows, title, {"overrides": list(overrides),
                                                          "backend": backend.describe(), "seeds": cfg.bench.seeds},
                                 boot=boot)
    print(console_table(rows, bench_reports(bench_dir, rows), bench_dir))
    print("\n".join(f"[bench] {line}" for line in summary_lines(summary)))
    print(f"[bench] table: {bench_dir / 'bench.md'} (also bench.json, bench.html); to resume or extend: "
          f"kernelevo bench ... bench.dir={bench_dir}", flush=True)
    if stopped:
        interrupted(stopped)


def resume(cfg: DictConfig) -> None:
    """Continue a run from its store, with the config it was started with and the budgets given now."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from evo.run import check_run_config, execute
    from kernelevo.resuming import check_resume, resume_config
    from operators.llm.ledger import LLMError

    given = [o.key_or_group for o in OverridesParser.create().parse_overrides(list(HydraConfig.get().overrides.task))]
    changes = {key: OmegaConf.select(cfg, key) for key in given if key != "run_dir" and not key.startswith("hydra")}
    run_dir = Path(cfg.run_dir)
    try:
        note = check_resume(run_dir, changes)  # a resume that would run nothing is refused, before it says anything
        config = resume_config(run_dir, changes)
        if note:
            log.info(note)
        checked = check_run_config(config)
        check_llm(config, checked.operators, warn=True)
        summary = execute(config, run_dir, checked)
    except ValueError as exc:
        fail(str(exc))
    except LLMError as exc:
        fail(f"{exc}; fix it, then: kernelevo resume run_dir={run_dir}", status=1)
    except KeyboardInterrupt:
        _interrupted_run(run_dir)
    llm_stop(run_dir, summary.stop_reason)


def report(cfg: DictConfig) -> None:
    """Write a run's report: report.html (self-contained), report.md and fitness.png."""
    from evo.report_html import write_report

    try:
        path = write_report(Path(cfg.run_dir))
    except ValueError as exc:
        fail(str(exc))
    print(f"report written to {path}")


COMMANDS = {
    "run": Command("config", run, "evolve a faster Triton kernel (default: embedded problem, offline operators)",
                   check_run),
    "resume": Command("resume", resume, "continue a run, or extend its budget: kernelevo resume run_dir=DIR "
                                        "[search.generations=N ...]", check_run_dir),
    "report": Command("report", report, "write a run's report (report.html): kernelevo report run_dir=DIR",
                      check_run_dir),
    "evaluate": Command("evaluate", evaluate, "judge one candidate kernel: correctness, guards, timing",
                        check_evaluate),
    "bench": Command("bench", bench, "one search per problem over a KernelBench selection, one table: kernelevo "
                                     "bench bench.root=KB bench.problems=LIST", check_bench),
    "seed": Command("seed", seed, "write the seed converted from torch.compile's kernels: kernelevo seed "
                                  "problem=P [out=PATH]", check_seed),
}
