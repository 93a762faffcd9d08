"""The evaluator: one problem, one precision policy, one device; candidates in, ``EvalResult`` records out.

    static check (here) -> worker process: correctness gate, honesty guards, timing -> baselines (once, cached)
    -> speed-ups, speed-of-light fraction and plausibility (here) -> EvalResult

``evaluate`` may be called from many threads at once: each call gets its own worker process (forked by the
sandbox's fork server; ``spares`` of them are kept warm), and the workers share the GPU through its reader/writer
lock (correctness trials shared, timing exclusive; ``fitness.common.gpu_lock``).

Usage::

    with Evaluator(resolve_problem("row_softmax"), policy, profile, EvalSettings()) as ev:
        result = ev.evaluate(source)
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

from fitness.measure import baseline_cache
from fitness.workers import ncu
from fitness.measure.baselines import (BASELINE_PROCESSES, BASELINES, COMPILED, NOT_MEASURED, Baseline, measure,
                                       measured_here)
from fitness.judge.candidate import source_hash
from fitness.common.gpu_lock import LOCK_DIR, create_lock_files, lock_path
from fitness.comparison.policy import PrecisionPolicy
from fitness.problems.problem import ProblemSpec, load_problem
from kernelevo.core.evaluation_record import DEGENERATE, TIMED_OUT, EvalResult, ProblemCost, Status
from fitness.measure.result import WorkerJob, WorkerResult
from fitness.workers.sandbox import JobOutcome, Sandbox
from fitness.evaluation.scrub import scrub_secrets
from fitness.problems.sizes import int_constants
from fitness.problems.speed_of_light import data_floor_s, measure_cost, speed_of_light_s
from fitness.judge.precision_check import precision_findings
from fitness.judge.static_check import check_source
from fitness.problems.target import target_for
from fitness.settings import EvalSettings
from fitness.measure.timing import TimingStats
from hardware_profiles import HardwareProfile


class BaselineSlot:
    """The baselines of one problem and policy: measured once, shared by every evaluator of a pool."""

    def __init__(self):
        self.lock = threading.Lock()
        self.value: Baseline | None = None
        self.wall_s = 0.0


def start_up_under_lock(settings: EvalSettings, profile: HardwareProfile) -> bool:
    """fitness.start_up_under_lock, or where unset, whether the profile lacks a measurement saying start-ups do not
    disturb a timing."""
    if settings.start_up_under_lock is not None:
        return bool(settings.start_up_under_lock)
    return profile.start_up_disturbs_timing is not False


def implausibility(time_s: float, floor_s: float, margin: float, profile: HardwareProfile) -> str:
    """Why a measured time is physically impossible on this hardware, or "" when it is plausible: below `margin` x
    the data floor (what the output depends on read once and the output written, over bandwidth). The reference's
    FLOPs never count: an exact rewrite of its algebra need not do them."""
    if time_s >= margin * floor_s:
        return ""
    return (f"implausible time: {time_s * 1e6:.1f} us is below the data floor {floor_s * 1e6:.1f} us on "
            f"{profile.display_name} (the bytes the output depends on, read once, and the output written, over "
            f"bandwidth): the timed call cannot have read its inputs")


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_cache_dir(settings: EvalSettings | None = None) -> Path:
    """Where kernelevo keeps what outlives a run (Inductor's seeds and their verdicts, the baselines' times and compile
    cache): `settings`' ``fitness.cache_dir`` where given, else $XDG_CACHE_HOME/kernelevo, by default
    ~/.cache/kernelevo. Read when asked, so a changed HOME (the tests') counts."""
    if settings is not None and settings.cache_dir:
        return Path(settings.cache_dir).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kernelevo"


def sandbox_options(settings: EvalSettings, profile: HardwareProfile, device: str,
                    cache_dir: Path | None = None) -> dict:
    """The settings of the sandbox an evaluator of `device` runs its jobs in (``Sandbox``'s, or a lease's from
    ``fitness.workers.pool``), besides its device."""
    under_lock = start_up_under_lock(settings, profile)
    return {"trusted_cache_dir": Path(cache_dir or default_cache_dir(settings)) / "baseline-cache",
            "spares": settings.warm_spares(1), "confine": settings.confine,
            "warm": {"judge": settings.warm_judge, "gpu_lock": lock_path(LOCK_DIR, device),
                     "start_up_under_lock": under_lock}}


class Evaluator:
    """The evaluator of this host (``fitness.evaluation.evaluating.Evaluating``): its jobs run in a sandbox here."""

    def __init__(self, problem: ProblemSpec, policy: PrecisionPolicy, profile: HardwareProfile,
                 settings: EvalSettings | None = None, device: str | None = None, cache_dir: Path | None = None,
                 baseline_slot: BaselineSlot | None = None, sandbox: Sandbox | None = None):
        """`sandbox`: an open Sandbox on the same device to run this evaluator's jobs in (another evaluator's, e.g.
        the run's for its check at other sizes: one fork server serves both), left open by `close`; None: one of
        its own."""
        self.problem, self.policy, self.profile = problem, policy, profile
        settings = settings or EvalSettings()
        self.settings = replace(settings, start_up_under_lock=start_up_under_lock(settings, profile))
        self.device = device or default_device()
        self.on_gpu = self.device.startswith("cuda")
        self.cache_dir = Path(cache_dir or default_cache_dir(settings))
        loaded = load_problem(self.problem)  # raises ProblemError early, in the caller's process
        self.sizes_used = int_constants(loaded.module)  # the size constants in effect (file's, preset, overrides)
        self.target = target_for(problem, self.device, profile, policy.tf32, loaded)  # what kernels are written for
        # the cost model at the judged sizes: on a GPU those are the target's (the same forward on the meta device)
        self.dependence = self.target.dependence  # which inputs the output depends on (fitness.problems.dependence)
        self.cost = self.target.cost if self.on_gpu else self._measure_cost(loaded)
        self.sol_s = speed_of_light_s(self.cost, profile, policy.tf32) if (self.cost and self.on_gpu) else None
        self.floor_s = data_floor_s(self.cost, profile) if (self.cost and self.on_gpu) else None
        self._baselines = baseline_slot or BaselineSlot()
        self.memory_slots: int | None = None  # problem-sized device memory admitted N at a time (set_memory_slots)
        self._cut_at: float | None = None  # perf_counter() at which a candidate's job still running is killed
        create_lock_files(lock_path(LOCK_DIR, self.device))  # workers cannot create files there
        if sandbox is not None and sandbox.device != self.device:
            raise ValueError(f"an evaluator on {self.device} cannot run its jobs in a sandbox on {sandbox.device}")
        self._owns_sandbox = sandbox is None
        self._sandbox = sandbox or Sandbox(self.device, **sandbox_options(self.settings, profile, self.device,
                                                                          self.cache_dir))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def sandbox(self) -> Sandbox:
        """Where its jobs run (to share with another evaluator on this device)."""
        return self._sandbox

    def close(self) -> None:
        if self._owns_sandbox:
            self._sandbox.close()

    def cut_running_at(self, deadline: float | None) -> None:
        """From `deadline` (``time.perf_counter()``) on, a candidate's job still running is killed by the sandbox
        and answers ``cancelled`` (``Sandbox.run``'s `cut_at`); None: no cut."""
        self._cut_at = deadline

    def set_spares(self, in_flight: int) -> None:
        """Keep warm workers ready for `in_flight` evaluations at once on this evaluator's device (``spares``)."""
        self._sandbox.spares = self.settings.warm_spares(in_flight)

    def set_memory_slots(self, slots: int | None) -> None:
        """How many of this GPU's jobs may hold problem-sized memory at once (``gpu_lock.memory_slot``); None: all."""
        self.memory_slots = slots if self.on_gpu and slots else None
        create_lock_files(lock_path(LOCK_DIR, self.device), self.memory_slots)

    def describe(self) -> str:
        where = (f"GPU {self.profile.display_name}" if self.on_gpu
                 else "no GPU: running kernels on the CPU through Triton's interpreter (times are wall-clock)")
        target = "" if self.on_gpu else f"; {self.target.describe()}"
        profiler = f"; profiler: {self.profiler_note() or 'ncu'}" if self.settings.profile != "none" else ""
        return (f"problem {self.problem.name} at {self.sizes_text()}; policy {self.policy.name}; {where}{target}"
                f"; {self.coverage_text()}{profiler}")

    def coverage_inputs(self) -> list[int] | None:
        """The forward arguments the coverage trial changes: those the output depends on (None: not decided, every
        floating-point tensor; ``fitness.coverage``)."""
        if self.dependence is None or not self.dependence.inputs:
            return None
        return [i for i, used in enumerate(self.dependence.inputs) if used]

    def coverage_text(self) -> str:
        """What the coverage trial covers, for the start line."""
        if not self.settings.coverage:
            return "coverage trial off (fitness.coverage=false)"
        wanted, dep = self.coverage_inputs(), self.dependence
        if wanted is None:
            return "coverage trial on every floating-point input"
        ignored = f" (the output ignores {', '.join(dep.ignored_inputs)})" if dep.ignored_inputs else ""
        if not wanted:
            degenerate = " even beyond get_inputs()'s values: degenerate" if dep.degenerate else ""
            return f"no coverage trial: no change of an input moves the reference's output{degenerate}{ignored}"
        probes = "".join(f"; probe trial: {dep.name(i)} {probe}" for i, probe in dep.beyond)
        return f"coverage trial on {', '.join(dep.name(i) for i in wanted)}{ignored}{probes}"

    def sizes_text(self) -> str:
        """The sizes actually used, and where they come from: `batch_size=5, dim=519 (test sizes of ...)`."""
        used = ", ".join(f"{k}={v}" for k, v in self.sizes_used.items()) or "its own sizes"
        return used + (f" ({self.problem.size_note})" if self.problem.size_note else "")

    # jobs ------------------------------------------------------------------------------------------------------
    def _measure_cost(self, loaded) -> ProblemCost | None:
        try:
            return measure_cost(loaded, self.dependence)
        except Exception:  # a reference the meta device cannot run: no speed-of-light figure
            return None

    def _job(self, kind: str, policy: PrecisionPolicy | None = None, **extra) -> WorkerJob:
        return WorkerJob(kind=kind, device=self.device, problem=self.problem.to_dict(),
                         policy=(policy or self.policy).to_dict(),
                         settings=self.settings, l2_bytes=self.profile.l2_cache_bytes,
                         gpu_lock=lock_path(LOCK_DIR, self.device), memory_slots=self.memory_slots,
                         coverage_inputs=self.coverage_inputs(),
                         probes=[list(each) for each in self.dependence.beyond] if self.dependence else [],
                         input_names=list(self.dependence.input_names) if self.dependence else [],
                         # the reference's matmuls (FLOPs counted; unknown: assumed): only they round differently
                         # under TF32
                         reference_matmuls=self.cost is None or bool(self.cost.flops), **extra)

    @property
    def baseline_wall_s(self) -> float:
        return self._baselines.wall_s

    @property
    def baseline_names(self) -> list[str]:
        """The baselines measured here: those configured, the compiled ones only on a GPU."""
        return measured_here(self.settings.baselines, self.on_gpu)

    def baseline(self) -> Baseline:
        """The baselines' times (eager, torch.compile, max-autotune: ``fitness.baselines``), measured once (per slot)
        in trusted workers, or read from the machine's cache of them (``fitness.measure.baseline_cache``)."""
        with self._baselines.lock:
            if self._baselines.value is None:
                self._baselines.value = baseline_cache.cached_or_measured(
                    self.cache_dir, baseline_cache.facts(self), self._measure_baseline)
        return self._baselines.value

    def baseline_ieee(self, names: list[str]) -> Baseline | None:
        """The compiled baselines `names` timed again with IEEE fp32 dot products (the policy with TF32 off), for
        those whose own kernels fail the policy with TF32 (``evo.runs.run.measure_ieee_baselines``): measured once
        per machine, as `baseline` is; None off a GPU or where the policy has no TF32 (nothing differs)."""
        wanted = [name for name in names if name in self.baseline_names and name in COMPILED]
        if not (self.on_gpu and self.policy.tf32 and wanted):
            return None
        ieee = replace(self.policy, tf32=False)
        return baseline_cache.cached_or_measured(self.cache_dir, baseline_cache.facts(self, ieee, wanted),
                                                 lambda: self._measure_baseline(ieee, wanted))

    def _measure_baseline(self, policy: PrecisionPolicy | None = None, names: list[str] | None = None) -> Baseline:
        """On a GPU in BASELINE_PROCESSES fresh workers one after the other, the fastest reading of each kept
        (`fitness.measure.baselines.measure`); one on the interpreter, whose times are never turned into speed-ups.
        `policy`, `names`: another policy's measurement of some of them (``baseline_ieee``)."""
        start, timeout = time.perf_counter(), self.settings.baseline_timeout_s
        asked = self.baseline_names if names is None else names
        limit = self.settings.baseline_compile_timeout_s

        def run(wanted: list[str]):
            return self._sandbox.run(self._job("baseline", policy, baselines=wanted), timeout, trusted=True,
                                     compile_timeout_s=limit)

        baseline = measure(run, asked, BASELINE_PROCESSES if self.on_gpu else 1,
                           lambda outcome: outcome.failure_reason(timeout, self._timeout_context()), limit)
        if names is not None:
            return baseline
        for name in self.settings.baselines:
            if name not in asked:
                baseline.status[name] = NOT_MEASURED
                baseline.notes.append(f"baseline {name}: not measured on Triton's CPU interpreter")
        self._baselines.wall_s = time.perf_counter() - start
        return baseline

    def _timeout_context(self) -> str:
        """What a timeout's reason adds: the sizes and, on the interpreter, that they may be the cause."""
        if self.on_gpu:
            return f"problem at {self.sizes_text()} (an infinite loop or a hang?)"
        return (f"problem at {self.sizes_text()}; Triton's CPU interpreter runs kernels thousands of times slower "
                f"than a GPU: smaller sizes (problem.sizes.NAME=N) or a longer fitness.timeout_s")

    # evaluation ------------------------------------------------------------------------------------------------
    def _new_result(self, source: str, label: str) -> EvalResult:
        return EvalResult(status=Status.OK, problem=self.problem.name, sizes=dict(self.problem.sizes),
                          policy=self.policy.to_dict(), device=self.device, hardware_profile=self.profile.name,
                          timer="cuda-events" if self.on_gpu else "interpreter", candidate_hash=source_hash(source),
                          label=label, trials=self.settings.trials,
                          cost=self.cost)

    def _pre_checks(self, source: str, result: EvalResult) -> bool:
        """Syntax and static checks in this process; False when the candidate must not run."""
        try:
            findings = check_source(source)
            if self.cost is not None and self.cost.dtype == "fp32":  # the policy's operands (unknown dtype: none)
                findings = sorted(findings + precision_findings(source, self.policy), key=lambda f: f.line)
        except SyntaxError as exc:
            result.status, result.reason = Status.COMPILE_ERROR, f"syntax error: line {exc.lineno}: {exc.msg}"
            return False
        if findings and self.settings.static_check:
            result.status = Status.REJECTED
            result.reason = "static check: " + "; ".join(str(f) for f in findings)
            return False
        return True

    def _apply_outcome(self, outcome: JobOutcome, result: EvalResult) -> None:
        result.log_tail = outcome.log_tail if outcome.result is None or outcome.result.get("status") != "ok" else ""
        if outcome.infrastructure:  # no verdict on the kernel: the evaluation service retries it, never stores it
            result.status, result.reason = Status.INFRASTRUCTURE, outcome.failure_reason(self.settings.timeout_s)
            return
        if outcome.status == "cancelled":  # still running at the search's cut: killed, no verdict, never stored
            result.status, result.reason = Status.CANCELLED, (f"cut: the search's budget was spent while it was "
                                                              f"{outcome.stage or 'starting'}; its worker was killed")
            return
        if outcome.result is None:
            result.status = outcome.status if outcome.status in TIMED_OUT else Status.CRASHED
            result.reason = outcome.failure_reason(self.settings.timeout_s, self._timeout_context())
            return
        data = WorkerResult.from_dict(outcome.result)
        result.status, result.reason = data.status, data.reason
        for key, value in data.verdict().items():
            setattr(result, key, value)
        result.notes.extend(data.notes)  # the judge's own notes (fewer timing input sets, say)
        if self.dependence is not None and self.dependence.degenerate and result.guards:
            result.guards.setdefault("labels", []).append(DEGENERATE)  # the problem's, on every verdict judged
        for label in result.guards.get("labels", []):  # uses-torch-compute, draws-random-numbers, degenerate-problem
            result.label = ", ".join(filter(None, [result.label, label]))

    def _score(self, result: EvalResult) -> float:
        """Speed-ups against the baselines, speed-of-light fraction and the plausibility guard; returns the seconds
        spent measuring (or waiting for another thread to measure) the one-off baselines."""
        stats = TimingStats.from_dict(result.timing.get("candidate"))
        result.time_s = stats.median_s
        if not self.on_gpu:
            result.notes.append("interpreter wall-clock times: not comparable with GPU figures, no speed-ups")
            result.baseline_status = {name: NOT_MEASURED for name in self.settings.baselines}
            return 0.0
        had_baseline, start = self._baselines.value is not None, time.perf_counter()
        baseline = self.baseline()
        waited = 0.0 if had_baseline else time.perf_counter() - start
        if waited:
            result.notes.append(f"baselines measured once for this run in {self.baseline_wall_s:.1f} s")
        result.notes.extend(baseline.notes)
        for name, value in baseline.figures(stats.median_s).items():
            setattr(result, name, value)
        result.timing.update({name: s.to_dict() for name in BASELINES
                              if (s := baseline.stats(name)) is not None})
        if self.sol_s is not None:  # reported only: may exceed 100 % for an algorithm cheaper than the reference's
            result.sol_s, result.sol_fraction = self.sol_s, self.sol_s / stats.median_s
        if self.floor_s is None:
            result.notes.append("data floor unknown for this problem or hardware profile: no plausibility check")
            return waited
        result.floor_s, result.floor_fraction = self.floor_s, self.floor_s / stats.median_s
        reason = implausibility(stats.median_s, self.floor_s, self.settings.plausibility_margin, self.profile)
        if self.settings.plausibility and reason:
            result.status, result.reason = Status.REJECTED, reason
        return waited

    # profiler feedback ---------------------------------------------------------------------------------------
    def profiler_note(self) -> str:
        """Why `profile_kernel` gives no metrics here ("" when it can)."""
        return ncu.unavailable(self.on_gpu)

    def profile_kernel(self, source: str) -> dict:
        """Profiler metrics of a judged candidate (``fitness.profile``): {} when profiling is off, else the
        record of ``fitness.workers.ncu`` (its kernels' metrics, or a note saying why there are none)."""
        if self.settings.profile == "none":
            return {}
        note = self.profiler_note()
        if note:
            return {"tool": self.settings.profile, "note": note}
        tool = ncu.find_ncu()
        job = self._job("profile", source=source, ncu=tool, ncu_timeout_s=self.settings.profile_timeout_s,
                        readable=ncu.readable_paths(tool))
        outcome = self._sandbox.run(job, self.settings.profile_timeout_s + self.settings.timeout_s,
                                    cut_at=self._cut_at)
        if outcome.status == "cancelled":  # still running at the search's cut: killed, no record (none stored)
            return {}
        if outcome.result is None or "profile" not in outcome.result:
            reason = (outcome.result or {}).get("reason") or outcome.failure_reason(self.settings.profile_timeout_s)
            return {"tool": "ncu", "note": f"the profiling run failed: {reason}"[:600],
                    **({"infrastructure": True} if outcome.infrastructure else {})}  # not the kernel's: not stored
        return outcome.result["profile"]

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        """Judge one candidate source; never raises for anything the candidate does. Thread-safe."""
        return self._judged(source, label, timed=True)

    def correctness(self, source: str, label: str = "") -> EvalResult:
        """Judge one candidate's correctness only (its trials and guards): no timing, no baselines, no speed-ups
        (time_s None); as `evaluate` otherwise."""
        return self._judged(source, label, timed=False)

    def _judged(self, source: str, label: str, timed: bool) -> EvalResult:
        start, baseline_s, wall = time.perf_counter(), 0.0, time.time()
        result = self._new_result(source, label)
        if self._pre_checks(source, result):
            outcome = self._sandbox.run(self._job("candidate", source=source, timed=timed), self.settings.timeout_s,
                                        compile_timeout_s=self.settings.compile_timeout_s,
                                        cut_at=self._cut_at)
            self._apply_outcome(outcome, result)
            if result.ok and timed:
                baseline_s = self._score(result)
            elif result.ok:
                result.notes.append("correctness only: not timed, no baselines")
        result.eval_wall_s = time.perf_counter() - start - baseline_s  # the one-off baselines are no one's cost
        result.spans = [["evaluation", wall, time.time()], *result.spans]
        scrub_secrets(result)  # whatever the candidate printed or raised may quote a secret it found somewhere
        return result
