"""The baselines a kernel's speed-ups are measured against: what a user would otherwise ship.

    eager         the reference Model as written
    compile       torch.compile at its defaults
    max_autotune  torch.compile(mode="max-autotune-no-cudagraphs")

``fitness.baselines`` (conf/fitness/default.yaml) names the ones measured. They are measured once per problem,
sizes, GPU and precision policy (TF32 as the policy says) in the trusted baseline job (``fitness.workers.worker``), in
BASELINE_PROCESSES fresh workers with the fastest reading of each kept (``fitness.measure.timing.fastest_baselines``);
the compiled ones only on a GPU. A baseline whose compilation fails has the status ``failed``; one still compiling after
``fitness.baseline_compile_timeout_s`` has its worker stopped by the sandbox (as a candidate's compile time limit
is), the status ``compile_timeout``, and the job is run again without it: either way with a note, and the others
still stand. Every result gives the speed-up against each one measured and against the fastest of them (``best``,
naming which it was). The baseline job also reads the code Inductor wrote for each compiled baseline as it compiled
it (no second compilation) and keeps the library kernels it calls (``library_kernels``: cuBLAS, cuDNN...), which
policy ``triton`` forbids a candidate: a row says when its best baseline is one, and gives the speed-up over the
best baseline a Triton kernel could be (``triton_best``).
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

from fitness.common.formatting import NA, speedup
from fitness.settings import BASELINES
from fitness.common.stage import BASELINE_COMPILE_STAGE
from fitness.measure.timing import TimingStats, fastest_baselines

PRECISION_NOTE = "baselines at fp32 matmul precision"  # every measurement's first note: "... 'high'"
COMPILED = {"compile": {}, "max_autotune": {"mode": "max-autotune-no-cudagraphs"}}  # torch.compile's arguments
LABELS = {"eager": "eager", "compile": "torch.compile", "max_autotune": "torch.compile max-autotune",
          "best": "the best baseline"}
BEST = "best"  # the fastest baseline measured, whichever it was
OK, FAILED, COMPILE_TIMEOUT, NOT_MEASURED = "ok", "failed", "compile_timeout", "not_measured"
STATUS_TEXT = {FAILED: "failed", COMPILE_TIMEOUT: "too slow to compile", NOT_MEASURED: "not measured"}
BASELINE_PROCESSES = 2  # fresh workers that time the baselines on a GPU, one after the other (the fastest is kept)
TIE = 0.01  # a speed-up over the best baseline within this of 1 is a tie: timing noise on a GPU is about 1 %
# the library behind an extern kernel of Inductor's code, by the operator's name (others: "library")
LIBRARIES = {"mm": "cuBLAS", "addmm": "cuBLAS", "bias_addmm": "cuBLAS", "bmm": "cuBLAS", "baddbmm": "cuBLAS",
             "_int_mm": "cuBLAS",  # bias_addmm: Inductor's addmm with a broadcast bias (max-autotune's choice)
             "convolution": "cuDNN", "_convolution": "cuDNN", "_scaled_dot_product_flash_attention": "flash attention",
             "_scaled_dot_product_efficient_attention": "memory-efficient attention",
             "_scaled_dot_product_cudnn_attention": "cuDNN"}
EXTERN = re.compile(r"\b(extern_kernels|aten|torch\.ops\.aten)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.default)?\(")
EAGER_AT_BREAK = "eager at a graph break"  # a compiled baseline's code that Dynamo left to eager PyTorch
LIBRARY_RECORD = "library kernels, graph breaks, unimplemented"  # what `compiled_library` reads (the cache keys on it)
NOT_LIBRARY = {"empty", "empty_strided", "as_strided", "view", "reshape", "_reinterpret_tensor", "copy_", "zeros",
               "full", "resize_", "set_"}  # allocation and views in Inductor's wrapper: no compute


def library_kernels(codes: list[str]) -> list[str]:
    """The library kernels Inductor's output code calls (its wrapper's ``extern_kernels.mm(...)`` and direct ATen
    operators), each as `<library> extern_kernels.<op>` (e.g. ``cuBLAS extern_kernels.mm``), sorted; [] for code
    that is Triton only."""
    found = {(kind, op) for code in codes for kind, op in EXTERN.findall(code) if op not in NOT_LIBRARY}
    return sorted(f"{LIBRARIES.get(op, 'library')} {kind}.{op}" for kind, op in found)


@contextlib.contextmanager
def inductor_code():
    """The output code Inductor writes (or reads from its cache) while the block compiles, gathered into the list
    yielded: Inductor's own hook for it (``GraphLowering.save_output_code``, as ``torch._inductor.utils.
    run_and_get_code`` uses), without resetting Dynamo, so the compiled model is the one timed."""
    from unittest import mock

    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        yield codes


BREAK_COUNTERS = ("graph_break", "unimplemented")  # Dynamo's counters of what it left to eager PyTorch


@contextlib.contextmanager
def graph_breaks():
    """The first line of the reason of each graph break Dynamo takes while the block compiles, gathered into the list
    yielded (from Dynamo's own counters, as `torch._dynamo.explain` reads them), each reason once. Code at a graph
    break runs eagerly, whatever it calls: level3/35's nn.LSTM is cuDNN's in torch.compile's baselines too (Dynamo
    wraps no RNN). An nn.LSTM inside a model's forward is counted only as ``unimplemented`` (torch 2.11, 2.13), one
    compiled directly as a ``graph_break`` too: both are read."""
    from torch._dynamo.utils import counters

    before = {name: dict(counters[name]) for name in BREAK_COUNTERS}
    found: list[str] = []
    try:
        yield found
    finally:
        reasons = [reason.strip().splitlines()[0] for name in BREAK_COUNTERS
                   for reason, count in counters[name].items() if count > before[name].get(reason, 0)]
        found += list(dict.fromkeys(reasons))


def compiled_library(codes: list[str], breaks: list[str]) -> list[str]:
    """What a compiled baseline runs that policy ``triton`` forbids a candidate or that is not known to be Triton:
    the library kernels of Inductor's code (``library_kernels``) and, for each graph break, the eager code there
    (``eager at a graph break: <reason>``), so a baseline with a graph break is never counted Triton-expressible."""
    return library_kernels(codes) + sorted({f"{EAGER_AT_BREAK}: {reason}"[:160] for reason in breaks})


def library_of(record: dict, name: str) -> list[str] | None:
    """The library kernels baseline `name` runs, from a record with ``baseline_library`` (an EvalResult's fields, a
    summary.json): [] for none; None where not known. Eager runs one exactly where torch.compile at its defaults
    keeps one (Inductor keeps library calls for what eager sends to cuBLAS and cuDNN)."""
    library = record.get("baseline_library") or {}
    return library.get("compile") if name == "eager" else library.get(name)


def admitted_speedup(record: dict, name: str) -> float | None:
    """The speed-up over baseline `name` as the policy's tolerance admits it, from a record with the speed-up fields
    (a summary.json's): over its re-timing with IEEE fp32 dot products where its own kernels failed the policy with
    TF32 (``baselines_ieee_s`` and ``best_s``: ``evo.runs.run.measure_ieee_baselines``), else over it as timed."""
    ieee, best = (record.get("baselines_ieee_s") or {}).get(name), record.get("best_s")
    return ieee / best if ieee and best else record.get(f"speedup_vs_{name}")


def triton_best(record: dict) -> tuple[str, float] | None:
    """(name, speed-up) over the fastest baseline known to call no library kernel (a Triton kernel could be it),
    from a record with the speed-up fields and ``baseline_library``; None where no baseline is known to be so. A
    compiled baseline whose TF32 kernels fail the policy counts at its IEEE fp32 time where that was measured
    (``admitted_speedup``): a Triton kernel the policy admits could be that, not the TF32 one."""
    known = [(value, name) for name in BASELINES if library_of(record, name) == []
             and (value := admitted_speedup(record, name))]
    return (min(known)[1], min(known)[0]) if known else None


def measured_here(names: list[str], on_gpu: bool) -> list[str]:
    """Of the configured baselines, those measured on this device: the compiled ones only on a GPU."""
    return [n for n in names if on_gpu or n not in COMPILED]


def stage_of(name: str) -> str:
    """The worker's stage while it compiles baseline `name` (the sandbox stops it past the compile time limit)."""
    return f"{BASELINE_COMPILE_STAGE} {name}: torch.compile({_arguments(name)}) of the reference and its first call"


def compiling(stage: str) -> str | None:
    """The baseline a worker was compiling when it was stopped, from its stage (None: it was doing something else)."""
    if not stage.startswith(BASELINE_COMPILE_STAGE):
        return None
    name = stage[len(BASELINE_COMPILE_STAGE):].split(":")[0].strip()
    return name if name in COMPILED else None


def _arguments(name: str) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in COMPILED[name].items())


@dataclass
class Baseline:
    """The baselines of one problem and policy: each one's timing (None where not measured) and status."""
    eager: TimingStats | None
    compile: TimingStats | None
    notes: list
    max_autotune: TimingStats | None = None
    status: dict = field(default_factory=dict)  # name -> ok, failed, compile_timeout, not_measured
    cached: str = ""  # where it was read from and when it was measured ("": measured by this run)
    library: dict = field(default_factory=dict)  # compiled baseline -> its library kernels (library_kernels)
    jobs: list = field(default_factory=list)  # where each baseline job's time went (job_time; not cached)

    def stats(self, name: str) -> TimingStats | None:
        return getattr(self, name)

    def best(self) -> tuple[str, float] | None:
        """(name, median seconds) of the fastest baseline measured; None when none was."""
        times = [(s.median_s, n) for n in BASELINES if (s := self.stats(n)) is not None and s.median_s > 0]
        return (min(times)[1], min(times)[0]) if times else None

    def figures(self, time_s: float) -> dict:
        """A candidate's EvalResult fields against these baselines: each one's time and the speed-up over it (None
        where not measured), the speed-up over the best of them and its name, and the status of each."""
        fields: dict = {"baseline_status": dict(self.status), "baseline_library": dict(self.library)}
        for name in BASELINES:
            stats = self.stats(name)
            fields[f"{name}_s"] = stats.median_s if stats is not None else None
            fields[f"speedup_vs_{name}"] = stats.median_s / time_s if stats is not None else None
        best = self.best()
        fields["best_baseline"], fields["speedup_vs_best"] = (best[0], best[1] / time_s) if best else ("", None)
        return fields


def measure(run, names: list[str], processes: int, failure_reason, compile_limit_s: float | None) -> Baseline:
    """The baselines `names`, from `processes` baseline jobs one after the other. `run(names)` runs one job for those
    baselines and returns its ``JobOutcome``; `failure_reason(outcome)` says why a job gave no result. A compiled
    baseline whose compilation failed, or whose worker was stopped compiling it (past `compile_limit_s`, or out of
    the job's own time), is dropped (a note and its status) and the job is run again without it; any other failure
    of a job ends the measurement with what was read."""
    left, readings, notes = list(names), [], []
    status, library, jobs = {}, {}, []
    while left and len(readings) < processes:
        outcome = run(list(left))
        result = outcome.result or {}
        jobs.append(job_time(outcome))
        notes += [n for n in result.get("notes", []) if n not in notes]
        stuck = compiling(outcome.stage) if outcome.status in ("compile_timeout", "timeout") else None
        if stuck in left:
            status[stuck] = COMPILE_TIMEOUT
            why = (f"still compiling after {compile_limit_s:g} s, stopped (fitness.baseline_compile_timeout_s="
                   f"{compile_limit_s:g}: raise it to wait longer)" if outcome.status == "compile_timeout"
                   else failure_reason(outcome))
            notes.append(f"baseline {stuck} ({LABELS[stuck]}): {why}; measured without it, the other baselines "
                         f"stand")
            left.remove(stuck)
            continue
        if result.get("status") == "ok":
            readings.append(result.get("timing", {}))
            library.update(result.get("library") or {})
            for name, why in (result.get("failed") or {}).items():
                status[name] = FAILED
                notes.append(f"baseline {name} ({LABELS.get(name, name)}) failed: {why}"[:600])
                left = [n for n in left if n != name]
            continue
        notes.append(f"baseline timing failed{' in a later process' if readings else ''}: "
                     f"{result.get('reason') or failure_reason(outcome)}")
        break
    timings, slower = fastest_baselines(readings)
    for name in names:
        status[name] = OK if name in timings else status.get(name, FAILED)
    stats = {name: TimingStats.from_dict(timings.get(name)) for name in BASELINES}
    return Baseline(stats["eager"], stats["compile"], notes + slower, stats["max_autotune"], status,
                    library={name: kernels for name, kernels in library.items() if status.get(name) == OK},
                    jobs=jobs)


JOB_PHASES = ("import", "wait_start", "cuda_init", "wait_shared", "setup", "wait_exclusive", "timing")


def job_time(outcome) -> dict:
    """Where one baseline job's time went, from its ``JobOutcome``: its wall time, each compiled baseline's compile
    (with its first call; ``compile_s``) and the worker's phases (``fitness.judge.phases``: the waits for the GPU's
    lock among them); a job stopped before its result says only how it ended and in which stage."""
    result = outcome.result or {}
    phases = result.get("phases_s") or {}
    return {"wall_s": round(outcome.wall_s, 2), "status": outcome.status,
            **({"compile_s": result["compile_s"]} if result.get("compile_s") else {}),
            **{name: round(phases[name], 2) for name in JOB_PHASES if name in phases},
            **({} if result else {"stage": outcome.stage[:120]})}


def jobs_text(jobs: list[dict]) -> str:
    """One line per measurement: each job's wall time, its compiles and its phases over 1 s (e.g. ``job 1 212 s:
    compile max_autotune 150 s, timing 40 s, wait_exclusive 12 s``)."""
    said = []
    for index, job in enumerate(jobs, 1):
        parts = [f"compile {name} {seconds:.0f} s" for name, seconds in job.get("compile_s", {}).items()]
        parts += [f"{name} {job[name]:.0f} s" for name in JOB_PHASES if job.get(name, 0) >= 1]
        parts += [f"{job['status']} in: {job['stage']}"] if "stage" in job else []
        said.append(f"job {index} {job['wall_s']:.0f} s: {', '.join(parts) or 'no phase over 1 s'}")
    return "; ".join(said)


def speedup_text(value: float | None, status: str | None = None) -> str:
    """A speed-up for a table: `1.23x`, or why there is none (not measured, failed, too slow to compile)."""
    return speedup(value, STATUS_TEXT.get(status or "", NA))


def best_text(record: dict) -> str:
    """The speed-up over the best baseline with that baseline's name, e.g. `1.10x (torch.compile max-autotune)`,
    from a record holding `speedup_vs_best`, `best_baseline` and `baseline_status` (an EvalResult's fields, a
    summary.json)."""
    value, name = record.get("speedup_vs_best"), record.get("best_baseline")
    if value is None:
        statuses = set((record.get("baseline_status") or {}).values())
        return speedup_text(None, NOT_MEASURED if statuses == {NOT_MEASURED} else None)
    return f"{speedup(value)} ({LABELS.get(name, name)})"


def verdict(record: dict) -> str | None:
    """Whether to ship the kernel or the best baseline, from the speed-up over the best (None where none was
    measured): a kernel slower than what the user already has says so and names it, not only a figure below 1."""
    value, name = record.get("speedup_vs_best"), record.get("best_baseline")
    if value is None:
        return None
    label = LABELS.get(name, name)
    if value >= 1 + TIE:
        return f"faster than every baseline measured ({speedup(value)} over {label}, the fastest)"
    if value <= 1 - TIE:
        return f"slower than {label} ({speedup(value)}): {label} is the better choice for this problem"
    return f"ties {label} ({speedup(value)}, within {TIE:.0%})"


def speedup_rows(record: dict) -> list[tuple[str, str]]:
    """("speed-up vs eager", "3.00x") and so on for every baseline and the best, from a record with the speed-up
    fields (an EvalResult's, a summary.json): a figure, or why there is none; then the verdict, where there is one."""
    status, ieee = record.get("baseline_status") or {}, record.get("baselines_ieee_s") or {}
    said = verdict(record)
    rows = []
    for name in BASELINES:  # each with its IEEE fp32 re-timing beside it, where its TF32 kernels failed the policy
        rows.append((f"speed-up vs {LABELS[name]}", speedup_text(record.get(f"speedup_vs_{name}"), status.get(name))))
        rows += [(f"speed-up vs {LABELS[name]} with IEEE fp32 dots", speedup_text(admitted_speedup(record, name)))
                 ] if name in ieee else []
    return [*rows, ("speed-up vs the best baseline", best_text(record)), *([("verdict", said)] if said else [])]
