"""Task functions behind the `kernelevo` sub-commands; each receives its composed Hydra config and the command's one
typed plan made from it (``kernelevo.plans``)."""
from __future__ import annotations

import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from kernelevo.core.errors import KernelevoError
from evo.runs.failure import FailureKind, RunFailure
from fitness.common.lifeline import INTERRUPTED_EXIT
from fitness.measure import verdict_text
from kernelevo import benching, plans

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Command:
    config: str
    task: Callable  # task(cfg, plan): the command's work, in Hydra's job
    help: str
    # plan(cfg, overrides): the command's typed plan, made once from its composed config and checked, before Hydra
    # writes anything (kernelevo.plans); `overrides`: the command line's, as Hydra is given them
    plan: Callable
    check: Callable | None = None  # check(plan): the checks that reach outside (an LLM's server), on the command line
    # claimed(plan): the plan completed once the command holds its directory (a resume reads its run's store only
    # then: another process may hold it); None: the plan is complete
    claimed: Callable | None = None


class Failed(SystemExit):
    """A command's error, said on stderr: its exit status and its message (a sweep's job keeps it as its row)."""

    def __init__(self, message: str, status: int):
        super().__init__(status)
        self.message = message


def fail(message: str, status: int = 2) -> None:
    print(f"kernelevo: error: {message}", file=sys.stderr)
    raise Failed(message, status)


INTERRUPTED = INTERRUPTED_EXIT  # the exit code of a command ended by Ctrl-C
_failure_file: Path | None = None  # where this command writes its failure (``ask_failure_file``), until it has


def failure_of(exc: BaseException, problem: str = "") -> RunFailure:
    """A command's failure as its record (``evo.runs.failure``): its error said (``fail``), a user's; Ctrl-C, an
    interrupt; any other exception, a bug with its traceback."""
    if isinstance(exc, Failed):
        return RunFailure(exc.message, exc.code, FailureKind.USER, problem=problem)
    if isinstance(exc, KeyboardInterrupt):
        return RunFailure("interrupted", INTERRUPTED, FailureKind.INTERRUPTED, problem=problem)
    return RunFailure.of_bug(exc, problem=problem)


def ask_failure_file(path: Path | None) -> None:
    """Where this command writes its failure, should it fail (a bench names one for each of its runs: ``FAILURE_FILE``
    of ``evo.runs.failure``); None: nowhere."""
    global _failure_file
    _failure_file = path


def record_failure(failure: RunFailure) -> None:
    """This command's failure written where it was asked (``ask_failure_file``); the first one only: the failure
    that ended the command, not how it then unwound."""
    global _failure_file
    path, _failure_file = _failure_file, None
    if path is None:
        return
    try:
        failure.write(path)
    except OSError as exc:  # the bench reads the run's log instead, and its row says so
        print(f"kernelevo: the failure record could not be written to {path}: {exc}", file=sys.stderr)


def interrupted(line: str) -> None:
    """End a command that Ctrl-C interrupted: one line, exit code 130. Called once the interrupt has unwound the
    command (its `finally` blocks closed the store, the evaluators and their processes), so it leaves at once: a
    thread the interrupt left waiting must not hold the exit (one did, 1 run in 8); a second Ctrl-C meanwhile too."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(INTERRUPTED))
    from kernelevo.locations import CLAIMS

    for held in list(CLAIMS.values()):  # its directory given back (the kernel would drop the lock, not the file)
        held.release()
    record_failure(RunFailure(line.removeprefix("kernelevo: "), INTERRUPTED, FailureKind.INTERRUPTED))
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


def llm_stop(run_dir: Path, stop_reason: str) -> None:
    """After a run that its LLM stopped (too many failed calls in a row): the resume command; an error (exit 1) when
    no LLM child was made in the whole run."""
    from evo.records.store import RunStore
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


def no_correct_kernel(summary) -> None:
    """A run (or a resume) whose search ended with no correct kernel ends with exit code NO_CORRECT_EXIT, its
    table and best_kernel.py's header having said so."""
    from evo.reports.outcome import NO_CORRECT_EXIT

    if not summary.ok:
        print(f"kernelevo: no correct kernel ({summary.status}): exit code {NO_CORRECT_EXIT}", file=sys.stderr)
        sys.exit(NO_CORRECT_EXIT)


def evaluate(cfg: DictConfig, plan: plans.EvaluatePlan) -> None:
    """Evaluate one candidate (default: the problem's bundled seed) and print the verdict."""
    from fitness.evaluation.from_config import leased_evaluator, read_candidate

    try:
        evaluator, lease = leased_evaluator(plan.judge)
    except KernelevoError as exc:
        fail(str(exc))
    completed = False
    try:
        try:
            source, label = read_candidate(plan.candidate, evaluator.problem)
        except KernelevoError as exc:
            fail(str(exc))
        with evaluator:
            log.info(f"{evaluator.describe()}")
            result = evaluator.evaluate(source, label=label)
        completed = True
    finally:
        lease.end(keep=completed)  # a verdict given: its fork server serves the process's next command
    # the verdict first: should the write fail after all, it is not lost
    print(verdict_text.summary(result), flush=True)
    try:
        out = _out_path(plan.out)
        out.write_text(result.to_json())
    except OSError as exc:
        fail(f"the verdict above could not be written to out={plan.out}: {exc}")
    print(f"result written to {out}")
    if not result.ok:
        sys.exit(1)


def seed(cfg: DictConfig, plan: plans.SeedPlan) -> None:
    """Write the problem's seed converted from torch.compile's Triton kernels, without searching."""
    from fitness.evaluation.evaluator import default_cache_dir
    from fitness.evaluation.from_config import fitness_parts
    from kernelevo.seeds.inductor import inductor_seeds, policy_options, write_seeds

    try:
        parts = fitness_parts(plan.judge)
        device, problem, policy = parts.device, parts.problem, parts.policy
        sources = inductor_seeds(problem, device, parts.profile.name, default_cache_dir(parts.settings),
                                 variants=plan.variants, settings=plan.capture, **policy_options(policy))
    except KernelevoError as exc:  # SeedError included: it names what is missing and the ways out
        fail(str(exc))
    try:
        out = _out_path(plan.out)
        written = write_seeds(sources, out.parent, out.name)  # the variants next to the seed
    except OSError as exc:  # out= was checked before anything was compiled: something changed since
        fail(f"the seed could not be written to out={plan.out}: {exc}")
    for made_by, path in zip(sources, written):
        print(f"seed for {problem.name} ({made_by}; policy {policy.name}, {device}) written to {path}")
    print(f"evaluate one: kernelevo evaluate problem={plan.judge.problem.name} candidate={out}")


def run(cfg: DictConfig, planned: plans.PlannedRun) -> None:
    """Evolve a faster kernel for the configured problem; the run directory is Hydra's output directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from evo.records.claim import Claim
    from evo.runs.run import execute
    from kernelevo.locations import held, run_taken
    from operators.llm.ledger import LLMError

    run_dir, multirun = _output_dir(), HydraConfig.get().mode == RunMode.MULTIRUN
    own = held(run_dir)  # claimed before Hydra started; a job of --multirun claims its directory now
    try:
        own = own or Claim(run_dir, "wait for it to end, or start this sweep in another hydra.sweep.dir",
                           "kernelevo run").__enter__()
    except KernelevoError as exc:
        fail(str(exc))
    try:
        taken = run_taken(run_dir, "hydra.sweep.dir" if multirun else "hydra.run.dir")  # known before Hydra: checked
        if taken is not None:
            fail(taken)
        swept = {o.lstrip("+~").split("=", 1)[0] for o in HydraConfig.get().overrides.task} if multirun else set()
        try:  # runs of a sweep over search seeds (--seeds N) name theirs in every progress line
            summary = execute(planned.plan, run_dir, planned.checked,
                              tag=f"seed {planned.plan.search.seed}" if "search.seed" in swept else "")
        except LLMError as exc:  # the initialiser's call, before the search (no child is made without it)
            fail(f"{exc}; fix it, then: kernelevo resume run_dir={run_dir}", status=1)
        except KernelevoError as exc:  # a user's error; any other exception is a bug: its traceback, its directory
            fail(str(exc) + _discarded(run_dir, own))
        except KeyboardInterrupt:
            _interrupted_run(run_dir)
        llm_stop(run_dir, summary.stop_reason)
        if not multirun:  # a sweep's job: the sweep goes on, its table says which runs found none
            no_correct_kernel(summary)
    finally:
        if not held(run_dir):  # a job's own claim (the command line releases the one it made)
            own.release()


def _discarded(run_dir: Path, own) -> str:
    """After a run failed with a user's error (a KernelevoError: a bad problem, a failed seed capture): when it had
    evaluated nothing, the directory as it was before the run (none, when the run made it), so that nothing blocks
    running it there again; what to add to the error saying so ('' when the run kept its evaluations). A bug never
    comes here: its directory stays as the run left it."""
    from evo.records.store import DB_NAME, RunStore

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


def bench(cfg: DictConfig, plan: benching.BenchPlan) -> None:
    """One search per problem of a KernelBench selection, spread over the GPUs; the table over all of them."""
    from evo.benchmark.bench import BenchError, BenchInterrupted, execute_bench
    from evo.benchmark.selection import level_sizes
    from evo.benchmark.bench_report import bench_reports, console_table, row_line, summary_lines, write_bench_report
    from kernelevo.plans import plugin

    tasks = list(plan.tasks)
    try:
        backend = plugin(cfg.bench.backend)  # the bench/backend plug-in, a node of its own
    except KernelevoError as exc:
        fail(str(exc))
    bench_dir = Path(plan.bench.dir).expanduser().resolve() if plan.bench.dir else _output_dir().resolve()
    try:  # again, now that the bench directory is this command's: a bench may have written there since
        replaced = benching.set_aside(bench_dir, list(benching.check_rerun(plan, bench_dir)))
    except KernelevoError as exc:
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
        rows = benching.interrupted_rows(tasks, exc.rows, bench_dir)
        stopped = benching.interrupted_line(rows, bench_dir)
    except KeyboardInterrupt:
        interrupted(f"kernelevo: interrupted; {bench_dir} keeps every finished problem: continue with the same "
                    f"command and bench.dir={bench_dir}")
    kept = benching.kept_rows(bench_dir, tasks)  # problems this selection leaves out: their rows stay in the table
    if kept:
        print(f"[bench] {bench_dir} keeps {len(kept)} more problem{'s' if len(kept) > 1 else ''}, outside this "
              f"selection, in its table: {', '.join(r.label for r in kept)}", flush=True)
        rows = [*rows, *kept]
    seeds = f" x {plan.bench.seeds} search seeds" if plan.bench.seeds > 1 else ""
    title = plan.bench.title or f"kernelevo bench: {len({r.name for r in rows})} problems{seeds}"
    summary = write_bench_report(bench_dir, rows, title, {"overrides": list(plan.overrides),
                                                          "backend": backend.describe(), "seeds": plan.bench.seeds,
                                                          "level_sizes": level_sizes(plan.bench.root)},
                                 boot=plan.intervals)
    print(console_table(rows, bench_reports(bench_dir, rows), bench_dir))
    print("\n".join(f"[bench] {line}" for line in summary_lines(summary)))
    print(f"[bench] table: {bench_dir / 'bench.md'} (also bench.json, bench.html); to resume or extend: "
          f"kernelevo bench ... bench.dir={bench_dir}", flush=True)
    if stopped:
        interrupted(stopped)


def resume(cfg: DictConfig, plan: plans.ResumePlan) -> None:
    """Continue a run from its store, with the config it was started with and the budgets given now."""
    from evo.runs.run import execute
    from operators.llm.ledger import LLMError

    run_dir = plan.run_dir
    log.info(plan.line)
    if plan.note:
        log.info(plan.note)
    try:
        plans.check_llm(plan.run, warn=True)
        summary = execute(plan.run.plan, run_dir, plan.run.checked)
    except LLMError as exc:
        fail(f"{exc}; fix it, then: kernelevo resume run_dir={run_dir}", status=1)
    except KernelevoError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        _interrupted_run(run_dir)
    llm_stop(run_dir, summary.stop_reason)
    no_correct_kernel(summary)


def report(cfg: DictConfig, run_dir: Path) -> None:
    """Write a run's report: report.html (self-contained), report.md and fitness.png."""
    from evo.reports.report_html import write_report

    try:
        path = write_report(run_dir)
    except KernelevoError as exc:
        fail(str(exc))
    print(f"report written to {path}")


def check_table(cfg: DictConfig, overrides: list[str]):
    """The table command's plan: its typed config, checked (``kernelevo.tables.check_table``)."""
    from kernelevo.tables import check_table as check

    return check(cfg)


def table(cfg: DictConfig, plan) -> None:
    """One table over several bench directories (a benchmark run in parts): kernelevo/tables.py."""
    from kernelevo.tables import write_table

    try:
        write_table(plan)
    except KernelevoError as exc:
        fail(str(exc))


COMMANDS = {
    "run": Command("config", run, "evolve a faster Triton kernel (default: embedded problem, offline operators)",
                   plans.plan_run, plans.check_llm),
    "resume": Command("resume", resume, "continue a run, or extend its budget: kernelevo resume run_dir=DIR "
                                        "[search.generations=N ...]", plans.request_resume,
                      claimed=plans.plan_resume),
    "report": Command("report", report, "write a run's report (report.html): kernelevo report run_dir=DIR",
                      plans.plan_report),
    "evaluate": Command("evaluate", evaluate, "judge one candidate kernel: correctness, guards, timing",
                        plans.plan_evaluate),
    "bench": Command("bench", bench, "one search per problem over a KernelBench selection, one table: kernelevo "
                                     "bench bench.root=KB bench.problems=LIST", benching.plan_bench,
                     benching.check_bench),
    "table": Command("table", table, "one table over several bench directories (a benchmark run in parts): "
                                     "kernelevo table bench_dirs=[A,B] out=DIR", check_table),
    "seed": Command("seed", seed, "write the seed converted from torch.compile's kernels: kernelevo seed "
                                  "problem=P [out=PATH]", plans.plan_seed),
}
