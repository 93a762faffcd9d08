"""`kernelevo bench`: one search per problem over a KernelBench selection, spread over GPUs, gathered into one table.

Each problem is an ordinary `kernelevo run` in its own process and run directory (``BENCH/runs/<problem>``), with the
bench's run settings, on one GPU (``CUDA_VISIBLE_DEVICES``). A problem is finished when its row exists
(``BENCH/rows/<problem>.json``, written after its run ends, with the run's ``summary.json`` or the record of its
failure, ``BENCH/failures/<problem>.json``, which the run writes where the bench names it: ``evo.runs.failure``; its log
is read only when the process died without writing one); a re-run of the bench skips finished problems and resumes
started ones (`kernelevo resume`), so a kill loses nothing finished. A search dies with the bench, even one killed with
-9 (``fitness.common.lifeline``), and its workers with it: a killed bench leaves no search running on a GPU, nor two
writers of one run when it is re-run. Where the runs execute is a backend chosen in config (``bench.backend._target_``):
``LocalBackend`` (this host's GPUs, ``bench.per_gpu`` searches on each) or ``evo.benchmark.bench_ray.RayBackend``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelevo.core.errors import KernelevoError
from evo.benchmark.bench_interrupt import BenchInterrupted, Searches
from evo.benchmark.bench_progress import StageWatch, start_line
from evo.reports.outcome import NO_CORRECT_EXIT, SUMMARY_FILE, RunOutcome  # written at the end of every run
from evo.runs.failure import FAILURE_FILE, RunFailure
from evo.runs.start_gate import START_GATE, open_gate
from evo.records.store import RunStore
from evo.service.evaluation import SEARCHES_ON_HOST
from kernelevo.core.records import from_record
from fitness.common.atomic import write_atomic
from fitness.common.lifeline import INTERRUPTED_EXIT, lifeline_env

RUNS, ROWS, LOGS, GATES = "runs", "rows", "logs", "gates"
FAILURES = "failures"  # each failed run's record (evo.runs.failure), outside its run directory (which it may remove)
INTERRUPTED = "interrupted"  # a row's status when its search was stopped by Ctrl-C or a signal (not saved)
RESUMABLE = "resumable: the same command with this bench.dir continues it"  # an interrupted row's reason says so
NOT_STARTED = "not started"  # a row's status in the table of an interrupted bench, for a problem it had not begun


class BenchError(KernelevoError):
    """A bench that cannot start; the message names the problem and the fix."""


@dataclass(frozen=True)
class BenchTask:
    name: str  # unique within the bench: level1/23_Softmax, or a bundled name
    problem: str  # what `kernelevo run problem=` receives
    overrides: tuple = ()  # the bench's run settings, as Hydra overrides
    seed: int | None = None  # its search seed when the bench repeats each problem over several (bench.seeds)

    @property
    def slug(self) -> str:
        return slug(self.name, self.seed)

    @property
    def label(self) -> str:
        """The task as the bench says it: its problem, and its search seed where the bench repeats it."""
        return self.name if self.seed is None else f"{self.name} seed {self.seed}"


def slug(name: str, seed: int | None = None) -> str:
    """A problem's folder name in the bench (runs/<slug>, rows/<slug>.json); of one of its search seeds when the
    bench repeats it over several."""
    return name.replace("/", "__").removesuffix(".py") + ("" if seed is None else f"__seed{seed}")


@dataclass
class Row:
    name: str
    status: str  # ok, or why there is no kernel (a failed run, a failed seed, ...)
    reason: str = ""
    wall_s: float = 0.0
    gpu: str = ""
    summary: RunOutcome = field(default_factory=RunOutcome)  # the run's outcome (summary.json); none: nothing known
    search_seed: int | None = None  # its search seed, in a table of several seeds per problem (else None)
    problem: str = ""  # the problem its run searched, where `name` is not it (a multirun names a row by overrides)
    failure: RunFailure | None = None  # why its run failed, as the run recorded it (None: it did not, or no failure)

    @property
    def problem_name(self) -> str:
        """The problem the row's run searched: what the tables count as problems."""
        return self.problem or self.name

    @property
    def label(self) -> str:
        """The row in a table: its problem, and its search seed when the table has several per problem."""
        return self.name if self.search_seed is None else f"{self.name} seed {self.search_seed}"

    def to_dict(self) -> dict:
        return {**asdict(self), "failure": None if self.failure is None else self.failure.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: dict, where: str = "a bench row") -> "Row":
        """A row as saved (its outcome a summary.json's fields; a failed row's, none)."""
        failure = data.get("failure")
        return from_record(cls, {**data, "summary": RunOutcome.from_dict(data.get("summary") or {}, where),
                                 "failure": None if failure is None else RunFailure.from_dict(failure, where)}, where)

    @classmethod
    def from_json(cls, text: str, where: str = "a bench row") -> "Row":
        return cls.from_dict(json.loads(text), where)


# one problem -----------------------------------------------------------------------------------------------------
def started(run_dir: Path) -> bool:
    """Whether a run began in a run directory (its store holds the run's config: resume it). A store without one
    (the search was interrupted as it made it) is no run: the bench runs it again."""
    return RunStore.saved_run(run_dir) is not None


def run_command(task: BenchTask, run_dir: Path) -> list[str]:
    """`kernelevo run` for a new run directory, `kernelevo resume` for a started one."""
    cli = [sys.executable, "-m", "kernelevo.cli"]
    if started(run_dir):
        return [*cli, "resume", f"run_dir={run_dir}"]
    return [*cli, "run", f"problem={task.problem}", *task.overrides, f"hydra.run.dir={run_dir}"]


@dataclass
class Launched:
    """A problem's search process, started; `gate`: the file that lets it begin (None: it began at once)."""
    proc: subprocess.Popen
    started: float  # time.time() its run began (the gate's opening, for a prestarted one)
    log: Path
    gate: Path | None = None
    said: str = ""  # its start as the bench says it (start_line), once it begins
    log_from: int = 0  # its log's size when it started: what an earlier run of it wrote comes before

    def open(self) -> None:
        """Let a prestarted search begin: its wall time counts from now."""
        if self.gate is not None:
            open_gate(self.gate)
            self.started = time.time()
            print(self.said, flush=True)


def cpu_threads(searches_at_once: int) -> int:
    """CPU threads for each of `searches_at_once` problem processes sharing this host's cores: the host's cores
    divided among them, at least one each. torch's default, every core in every process, has the processes' CPU work
    (which inputs the output depends on) wait on each other's threads (docs/measurements.md)."""
    return max(1, len(os.sched_getaffinity(0)) // max(1, searches_at_once))


def launch(task: BenchTask, bench_dir: Path, gpu: str | None, searches: Searches, gated: bool = False,
           threads: int | None = None, sharing: int = 1) -> Launched | None:
    """Start (or resume) one problem's search in its own process on `gpu`; `gated`: it waits at a gate before it
    touches the GPU (``evo.runs.start_gate``) until ``Launched.open``; `threads`: its CPU threads
    (``OMP_NUM_THREADS``, unless set already in the bench's environment); `sharing`: the searches at once on this
    host, whose evaluations in flight share its cores (``evo.service.evaluation.auto_parallel``). Inductor's compile
    workers keep its default: capped to the same share, max-autotune baselines ran out of compile time
    (docs/measurements.md). None when the bench was interrupted first."""
    run_dir = bench_dir / RUNS / task.slug
    log = bench_dir / LOGS / f"{task.slug}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = lifeline_env()
    if threads is not None:
        env.setdefault("OMP_NUM_THREADS", str(threads))
    env[SEARCHES_ON_HOST] = str(sharing)  # its evaluations in flight (parallel=auto) share the cores too
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    failure = failure_file(bench_dir, task)
    failure.unlink(missing_ok=True)  # an earlier run's: this one writes its own should it fail
    env[FAILURE_FILE] = str(failure)
    gate = bench_dir / GATES / task.slug if gated else None
    if gate is not None:
        gate.unlink(missing_ok=True)
        env[START_GATE] = str(gate)
    said = start_line(task.label, gpu, started(run_dir), log)
    with open(log, "a") as out:
        log_from = out.tell()
        proc = searches.start(run_command(task, run_dir), stdout=out, stderr=subprocess.STDOUT, env=env)
    if proc is not None and gate is None:
        print(said, flush=True)
    return None if proc is None else Launched(proc, time.time(), log, gate, said, log_from)


def finish(task: BenchTask, launched: Launched, bench_dir: Path, gpu: str | None, timeout_s: float | None,
           searches: Searches) -> Row:
    """Wait for a launched search (`timeout_s` from now) and make its row, also when it failed."""
    run_dir = bench_dir / RUNS / task.slug
    watch = StageWatch(task.label, launched.log, launched.log_from).start()
    try:
        code = searches.wait(launched.proc, timeout_s)
    finally:
        watch.stop()
    wall = time.time() - launched.started
    if launched.gate is not None:
        launched.gate.unlink(missing_ok=True)
    summary_file = run_dir / SUMMARY_FILE
    if code in (0, NO_CORRECT_EXIT) and summary_file.is_file():  # a search that ended, with a correct kernel or not
        summary = RunOutcome.read(run_dir)
        return Row(task.name, summary.status, summary.stop_reason, wall, gpu or "", summary)
    if code is not None and (code == INTERRUPTED_EXIT or code < 0):  # stopped, not failed: a re-run resumes it
        return Row(task.name, INTERRUPTED, f"its search was interrupted (exit code {code}); {RESUMABLE}", wall,
                   gpu or "")
    log = launched.log
    tail = log.read_text(errors="replace").strip().splitlines()[-6:] if log.is_file() else []
    recorded = RunFailure.read(failure_file(bench_dir, task)) if code is not None else None
    if recorded is not None:  # the run said why: its error, or its bug with its traceback's last lines
        return Row(task.name, "failed", f"exit code {code}: {recorded.said}", wall, gpu or "", failure=recorded)
    if code is None:  # where it was: its last line of progress (the stage it was past), else still starting
        last = next((line for line in reversed(tail) if line.startswith("[kernelevo]")), None)
        where = (f"its last line: {last[:300]}" if last else
                 "before its first line (the process and its evaluation service were starting)")
        return Row(task.name, "failed", f"timed out after {timeout_s:g} s (bench.backend.timeout_s), {where}", wall,
                   gpu or "")
    said = " | ".join(tail)[-600:] or "its log is empty"  # the process ended before its command could say why
    return Row(task.name, "failed", f"exit code {code}, no failure record (the process ended without writing one); "
                                    f"its log's last lines: {said}", wall, gpu or "")


def failure_file(bench_dir: Path, task: BenchTask) -> Path:
    """Where a task's run writes its failure (``evo.runs.failure``): outside its run directory, which a run that
    fails with a user's error before its first evaluation removes."""
    return bench_dir / FAILURES / f"{task.slug}.json"


def run_task(task: BenchTask, bench_dir: Path, gpu: str | None, timeout_s: float | None = None,
             searches: Searches | None = None) -> Row | None:
    """Run (or resume) one problem's search in its own process on `gpu`; its row, also when it failed; None when
    the bench was interrupted before it started (`searches`: the bench's, ``evo.benchmark.bench_interrupt``). The
    process dies with this one, even when this one is killed (``fitness.common.lifeline``: it is started and waited for
    by this thread, which the lifeline needs), and takes its workers with it: a killed bench leaves no search
    running."""
    searches = searches or Searches()
    launched = launch(task, bench_dir, gpu, searches)
    return None if launched is None else finish(task, launched, bench_dir, gpu, timeout_s, searches)


def save_row(bench_dir: Path, task: BenchTask, row: Row) -> None:
    path = bench_dir / ROWS / f"{task.slug}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, row.to_json())


def saved_row(bench_dir: Path, task: BenchTask) -> Row | None:
    path = bench_dir / ROWS / f"{task.slug}.json"
    return Row.from_json(path.read_text(), str(path)) if path.is_file() else None


# backends ----------------------------------------------------------------------------------------------------------
def visible_gpus() -> list[str]:
    """This host's GPUs as CUDA_VISIBLE_DEVICES values (none: the CPU interpreter)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g for g in listed.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


class LocalBackend:
    """This host: `per_gpu` searches at once on each visible GPU (on a host without one, `per_gpu` at once on the
    CPU interpreter). `prestart`: on a GPU, each slot starts its next problem's process while the current one
    searches; that process waits at a gate before its first GPU work (``evo.runs.start_gate``), so its start-up
    (the interpreter, imports, config) overlaps the search before it."""

    def __init__(self, per_gpu: int = 1, timeout_s: float | None = None, prestart: bool = True):
        if per_gpu < 1:
            raise BenchError(f"bench.backend.per_gpu must be at least 1, got {per_gpu}")
        self.per_gpu, self.timeout_s, self.prestart = per_gpu, timeout_s, prestart

    def slots(self, gpus: list[str]) -> list[str | None]:
        """The searches at once: `per_gpu` on each of `gpus`, or on the CPU interpreter when there is none."""
        return [g for g in gpus or [None] for _ in range(self.per_gpu)]

    def describe(self) -> str:
        gpus = visible_gpus()
        ahead = ", the next problem prestarted" if self.prestart else ""
        threads = os.environ.get("OMP_NUM_THREADS") or cpu_threads(len(self.slots(gpus)))
        return (f"local: {len(gpus)} GPU(s) x {self.per_gpu}{ahead}" if gpus
                else f"local: CPU interpreter x {self.per_gpu}") + f"; {threads} CPU thread(s) each"

    def run(self, tasks: list[BenchTask], bench_dir: Path, done) -> None:
        """Run every task; `done(task, row)` as each finishes (from a worker thread). Ctrl-C: no task starts after
        it, the running searches (and those prestarted) are interrupted (``evo.benchmark.bench_interrupt``) and waited
        for, then KeyboardInterrupt again; a prestarted one that had not begun leaves no row (a re-run starts it)."""
        slots = self.slots(visible_gpus())
        threads = cpu_threads(len(slots))
        queue = list(tasks)
        searches = Searches()

        def pop() -> BenchTask | None:
            try:
                return queue.pop(0)  # list.pop is atomic under the GIL
            except IndexError:
                return None

        def worker(gpu):
            ahead = None  # (task, Launched): the slot's next problem, started, waiting at its gate
            try:
                while not searches.interrupted:
                    if ahead is not None:
                        (task, launched), ahead = ahead, None
                        launched.open()
                    elif (task := pop()) is None or \
                            (launched := launch(task, bench_dir, gpu, searches, threads=threads,
                                                     sharing=len(slots))) is None:
                        return
                    # prestarted only while the queue holds a task for every slot: at the tail, a task waiting
                    # behind one slot's search would leave another slot idle
                    if self.prestart and gpu is not None and len(queue) >= len(slots) \
                            and (following := pop()) is not None:
                        started = launch(following, bench_dir, gpu, searches, gated=True, threads=threads,
                                         sharing=len(slots))
                        ahead = (following, started) if started is not None else None
                    row = finish(task, launched, bench_dir, gpu, self.timeout_s, searches)
                    done(task, row)
            finally:
                if ahead is not None:  # interrupted before it began: stopped, no row
                    searches.wait(ahead[1].proc, None)
                    if ahead[1].gate is not None:
                        ahead[1].gate.unlink(missing_ok=True)

        pool = ThreadPoolExecutor(len(slots))
        futures = [pool.submit(worker, gpu) for gpu in slots]
        try:
            for future in futures:
                future.result()
        except KeyboardInterrupt:
            searches.interrupt()
            for future in futures:  # each search ends at its checkpoint (a second Ctrl-C ends the bench at once)
                future.result()
            raise
        finally:
            pool.shutdown(wait=False)


# the bench ---------------------------------------------------------------------------------------------------------
def execute_bench(tasks: list[BenchTask], backend, bench_dir: Path, on_row=None) -> list[Row]:
    """Run every unfinished task on `backend`; the rows of all tasks, in the selection's order."""
    bench_dir.mkdir(parents=True, exist_ok=True)
    rows = {t.slug: saved_row(bench_dir, t) for t in tasks}
    todo = [t for t in tasks if rows[t.slug] is None]
    seeds = len(tasks) // len({t.name for t in tasks}) if tasks else 1
    print(f"[bench] {len(tasks) // seeds} problems{f' x {seeds} search seeds' if seeds > 1 else ''}, "
          f"{len(tasks) - len(todo)}{' runs' if seeds > 1 else ''} finished before; {backend.describe()}; "
          f"bench dir {bench_dir}; each problem's log in {bench_dir / LOGS}", flush=True)

    def done(task: BenchTask, row: Row) -> None:
        row.search_seed = task.seed
        if row.status != INTERRUPTED:  # an interrupted search is not finished: the next run of the bench resumes it
            save_row(bench_dir, task, row)
        rows[task.slug] = row
        if on_row is not None:
            on_row(row)

    try:
        if todo:
            backend.run(todo, bench_dir, done)
    except KeyboardInterrupt:  # the backend has interrupted its searches and waited for them
        raise BenchInterrupted(rows) from None
    return [rows[t.slug] for t in tasks]
