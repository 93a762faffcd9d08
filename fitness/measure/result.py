"""The records of one evaluation: the job a worker is sent (``WorkerJob``), what it writes back (``WorkerResult``), and
the result every search, report and paper table reads (``EvalResult``)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from enum import Enum

from core.records import from_record
from fitness.common.formatting import seconds as format_seconds
from fitness.settings import EvalSettings


class Status(str, Enum):
    """The status of one evaluation (``EvalResult.status``), each value documented here once. A str-valued enum: it
    equals, hashes, prints and serialises (JSON, the run store) as its value, so ``status == "ok"`` and every stored
    record read back stay as they were; a value that is not a member is a bug, refused by name (``Status.of``)."""

    OK = "ok"  # correct on every trial (and timed, unless the job was correctness only)
    COMPILE_ERROR = "compile_error"  # the code did not compile or import (syntax, Triton's compiler, no ModelNew)
    # a build ran past fitness.compile_timeout_s (its worker killed while compiling): a configuration not to try again
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"  # raised while running (constructing ModelNew, a trial, the timing)
    TIMEOUT = "timeout"  # the whole evaluation ran past fitness.timeout_s and its worker was killed
    CRASHED = "crashed"  # the worker died without writing a result (segfault, os._exit, sys.exit in the candidate)
    INCORRECT = "incorrect"  # an output differs from the reference beyond the policy's tolerances
    REJECTED = "rejected"  # broke a rule: a static check, a guard, a cheat, an implausible time, the judge's state
    # no verdict, for a reason the candidate cannot cause (its worker's fork server died, no worker started, the job
    # could not be written, CUDA failed before the job): never the kernel's verdict, never stored
    INFRASTRUCTURE = "infrastructure_error"
    CANCELLED = "cancelled"  # not begun, or killed running, at the search's budget; no verdict, never stored

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def of(cls, value, where: str = "an evaluation") -> "Status":
        """`value` as a member; a value that is none is a bug of whatever wrote it, named here."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"{where} has unknown status {value!r}; one of {[s.value for s in cls]} "
                             f"(fitness.measure.result.Status)") from None


INFRASTRUCTURE = Status.INFRASTRUCTURE
CANCELLED = Status.CANCELLED
NO_VERDICT = frozenset({Status.INFRASTRUCTURE, Status.CANCELLED})  # say nothing of the kernel: such a child is dropped
STATUSES = tuple(Status)
# the kernels did not compile (an error, or a build past fitness.compile_timeout_s): a configuration not to try again
COMPILE_FAILURES = frozenset({Status.COMPILE_ERROR, Status.COMPILE_TIMEOUT})
TIMED_OUT = frozenset({Status.TIMEOUT, Status.COMPILE_TIMEOUT})  # ran out of time: the whole evaluation, or one build
NOT_JUDGED = "(the evaluation was not judged)"  # ends the reason of an infrastructure failure (older versions: a
                                                # "crashed" verdict with this reason, stored; see `infrastructure`)
MAX_REASON_CHARS = 2000
DEGENERATE = "degenerate-problem"  # the problem's label (fitness.problems.dependence), on each of its verdicts
# labels a verdict can carry (the guards' "labels"): what a kernel did that its precision policy allows but whoever
# reads its figures must know; every table and report names them
LABELS = {"uses-torch-compute": "forward computes part of its output with torch ops (its policy allows it): not all "
                                "of its work is Triton",
          "draws-random-numbers": "forward draws random numbers with torch's generator as the problem's reference "
                                  "does, seeded alike by the judge: those draws are torch calls, not Triton",
          DEGENERATE: "no input of the problem moves its output, even scaled, sign-flipped or shifted beyond the "
                      "values get_inputs() draws: a constant output, so its figures say little of a kernel"}


def trim_text(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Keep the head and tail of a long message: what an LLM needs to fix the code, not pages of traceback."""
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    head = limit // 3
    return f"{text[:head]}\n[... {len(text) - limit} characters trimmed ...]\n{text[-(limit - head):]}"


@dataclass
class EvalResult:
    status: Status  # a member of Status, however it is given (a value read back, a worker's str): checked when set
    reason: str = ""
    problem: str = ""
    sizes: dict = field(default_factory=dict)
    policy: dict = field(default_factory=dict)
    device: str = ""
    hardware_profile: str = ""
    timer: str = ""
    candidate_hash: str = ""
    label: str = ""
    trials: int = 0
    trials_passed: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2: float | None = None
    guards: dict = field(default_factory=dict)
    time_s: float | None = None
    eager_s: float | None = None
    compile_s: float | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    max_autotune_s: float | None = None  # torch.compile(mode="max-autotune-no-cudagraphs") (fitness.baselines)
    speedup_vs_max_autotune: float | None = None
    speedup_vs_best: float | None = None  # over the fastest baseline measured, named by best_baseline
    best_baseline: str = ""
    baseline_status: dict = field(default_factory=dict)  # baseline -> ok, failed, compile_timeout, not_measured
    # compiled baseline -> the library kernels (cuBLAS, cuDNN) its Inductor code calls, [] for none; a baseline not
    # named: not known (not compiled here, or measured before this was recorded)
    # (fitness.measure.baselines.library_kernels)
    baseline_library: dict = field(default_factory=dict)
    # two speed-of-light figures (fitness.problems.speed_of_light): the reference algorithm's roofline (max(all bytes
    # over bandwidth, the reference's FLOPs over peak): reported only, over 100 % for an algorithm cheaper than the
    # reference's; what sol_* meant in every earlier store) and the data floor (what the output depends on, read
    # once, and the output written, over bandwidth: the plausibility bound; absent from stores before issue 41)
    sol_s: float | None = None
    sol_fraction: float | None = None
    floor_s: float | None = None
    floor_fraction: float | None = None
    cost: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)  # full TimingStats of candidate / eager / compile / max_autotune
    notes: list = field(default_factory=list)
    eval_wall_s: float = 0.0
    input_seed: int | None = None  # the secret seed of the correctness and timing inputs (reproduction)
    phases_s: dict = field(default_factory=dict)  # where the worker's time went: import, idle, setup, trials, ...
    spans: list = field(default_factory=list)  # [stage, wall start, wall end]: the evaluation and its worker's stages
    log_tail: str = ""

    def __post_init__(self):
        self.reason = trim_text(self.reason)

    def __setattr__(self, name, value):
        if name == "status":  # at construction and at every later verdict: an unknown status is a bug, named here
            value = Status.of(value, "an evaluation result")
        object.__setattr__(self, name, value)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def labels(self) -> list[str]:
        """The verdict's labels (``LABELS``), e.g. ``uses-torch-compute``."""
        return list(self.guards.get("labels") or [])

    @property
    def infrastructure(self) -> bool:
        """No verdict on the kernel: the evaluation failed for a reason the candidate cannot cause (also such a
        failure that an older version recorded as "crashed")."""
        return self.status == Status.INFRASTRUCTURE or (self.status == Status.CRASHED
                                                         and self.reason.endswith(NOT_JUDGED))

    def to_dict(self) -> dict:
        """Its fields, the status as its plain value: what the run store, summary.json and every page keep."""
        return {**asdict(self), "status": self.status.value}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict, where: str = "a stored verdict") -> "EvalResult":
        return from_record(cls, data, where)

    def brief(self) -> str:
        """The verdict in one line, as a run tells its progress: ok and the time (interpreter wall-clock on the CPU),
        else the status and the reason's first line (at most 160 characters)."""
        if self.ok:
            wall = " (interpreter wall-clock)" if self.timer == "interpreter" else ""
            return f"ok, {format_seconds(self.time_s)}{wall}" if self.time_s is not None else "ok"
        first = self.reason.strip().splitlines()[0] if self.reason.strip() else ""
        first = first if len(first) <= 160 else first[:157] + "..."
        return f"{self.status}: {first}" if first else self.status

    def summary(self) -> str:
        """A readable verdict for the terminal."""
        lines = [f"status: {self.status}" + (f"  ({self.label})" if self.label else ""),
                 f"problem: {self.problem} {self.sizes or ''}".rstrip(),
                 f"policy: {self.policy.get('name', '?')}  device: {self.device}  timer: {self.timer}"]
        if self.reason:
            lines.append("reason: " + self.reason.replace("\n", "\n        "))
        if self.max_abs_err is not None:
            lines.append(f"correctness: {self.trials_passed}/{self.trials} trials, max abs err {self.max_abs_err:.3g},"
                         f" rel L2 {self.rel_l2:.3g}")
        elif self.status == Status.INCORRECT:  # outputs of another shape, dtype or count: no error to measure (reason)
            lines.append(f"correctness: {self.trials_passed}/{self.trials} trials passed; no error measured: the "
                         f"output could not be compared (see reason)")
        if self.time_s is not None and self.timer == "interpreter":  # wall-clock of the CPU interpreter: no baselines
            lines.append(f"time (interpreter wall-clock): {format_seconds(self.time_s)}")
        elif self.time_s is not None:
            lines.append(f"time: {format_seconds(self.time_s)}  eager: {format_seconds(self.eager_s)}  "
                         f"torch.compile: {format_seconds(self.compile_s)}  "
                         f"max-autotune: {format_seconds(self.max_autotune_s)}")
        if self.timer != "interpreter" and self.time_s is not None:
            from fitness.measure.baselines import BASELINES, LABELS, best_text, speedup_text, verdict

            record = self.to_dict()
            lines.append("speedup: " + ", ".join(
                f"{speedup_text(getattr(self, f'speedup_vs_{name}'), self.baseline_status.get(name))} vs "
                f"{LABELS[name]}" for name in BASELINES) + f"; {best_text(record)} vs the best")
            said = verdict(record)
            lines += [f"verdict: {said}"] if said else []
        if self.floor_fraction is not None:
            lines.append(f"data floor: {format_seconds(self.floor_s)}  fraction of the data floor: "
                         f"{self.floor_fraction:.1%}")
        if self.sol_fraction is not None:
            lines.append(f"reference algorithm's roofline: {format_seconds(self.sol_s)}  fraction of the reference "
                         f"algorithm's roofline: {self.sol_fraction:.1%} (over 100 %: fewer FLOPs than the reference)")
        lines.extend(f"note: {n}" for n in self.notes)
        lines.append(f"evaluation wall time: {self.eval_wall_s:.2f} s")
        return "\n".join(lines)


@dataclass
class WorkerJob:
    """What the evaluator sends a worker (``fitness.workers.worker``): the one list of the keys that cross the process
    boundary towards it, with their defaults here and in the judge's settings (``EvalSettings``, its timing's
    included: a worker reads them filled in, never merges defaults back); serialised in one place (``to_json``,
    ``from_dict``). Each kind reads its own fields: a candidate its `source` and `timed`, a baseline job its
    `baselines`, a profile job `source`, `ncu`, `ncu_timeout_s` and `readable`; a prewarm job only its device."""

    kind: str  # candidate, baseline, profile, prewarm
    device: str  # cpu (Triton's interpreter), cuda, cuda:N
    problem: dict = field(default_factory=dict)  # ProblemSpec.to_dict()
    policy: dict = field(default_factory=dict)  # PrecisionPolicy.to_dict()
    settings: EvalSettings = field(default_factory=EvalSettings)  # trials, seed, timing, ...
    l2_bytes: int = 0  # the device's L2 (a timer flushes twice that before each repetition)
    gpu_lock: str | None = None  # the device's lock file (``fitness.common.gpu_lock``); None: no lock (the interpreter)
    memory_slots: int | None = None  # jobs holding problem-sized memory at once (None: all)
    coverage_inputs: list | None = None  # forward arguments the coverage trial changes (None: every float tensor)
    probes: list = field(default_factory=list)  # [input index, probe name]: the probe trial's (fitness.judge.probes)
    input_names: list = field(default_factory=list)  # the forward's argument names (for the trial's messages)
    reference_matmuls: bool = True  # the reference has matmuls (only they round differently under TF32)
    source: str = ""  # the candidate's module (candidate, profile)
    timed: bool = True  # candidate: timed after its trials (false: its correctness only, no timing)
    baselines: list = field(default_factory=list)  # the baselines to time (baseline)
    ncu: str = ""  # Nsight Compute's executable (profile)
    ncu_timeout_s: float = 0.0  # one kernel's run under it (profile)
    readable: list = field(default_factory=list)  # paths a confined worker may read beside its own (profile: ncu's)
    result_path: str = ""  # where the worker writes its result (the sandbox sets it)
    token: str = ""  # returned with the result: proves it is the worker's (the sandbox sets it)

    def __post_init__(self):
        if isinstance(self.settings, dict):  # read back from JSON
            self.settings = from_record(EvalSettings, self.settings, "a worker's job settings", own=True)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> "WorkerJob":
        """Written by the evaluator of this very install: a key it does not know is refused by name (``own``)."""
        return from_record(cls, data, "a worker's job", own=True)


@dataclass
class WorkerResult:
    """What a worker writes for its job (``fitness.workers.worker``): the one list of the keys that cross the process
    boundary. ``from_dict`` names a key it does not know (a worker and a reader of different versions, a typo) instead
    of dropping it; the fields an ``EvalResult`` also has are the verdict it takes over (``verdict``)."""

    status: Status  # a member, however given (read back from the worker's JSON)
    reason: str = ""
    # a candidate's verdict (as far as it got)
    trials_passed: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2: float | None = None
    guards: dict | None = None
    timing: dict | None = None  # a candidate's TimingStats, or (baseline job) each baseline's
    input_seed: int | None = None
    notes: list = field(default_factory=list)
    # the other jobs
    failed: dict | None = None  # baseline job: compiled baselines that failed, with why
    library: dict | None = None  # baseline job: each compiled baseline's library kernels (fitness.baselines)
    profile: dict | None = None  # profile job: Nsight Compute's figures
    prewarm: str | None = None  # prewarm job: "ok"
    # the worker's own
    phases_s: dict | None = None
    spans: list | None = None
    worker: dict | None = None  # its pid, its fork server's, the confinement it got
    internal_error: bool = False  # an error of the problem or of kernelevo, not of the candidate
    infrastructure: bool = False  # failed before taking its job (CUDA initialisation): no verdict

    def __post_init__(self):
        self.status = Status.of(self.status, "a worker's result")

    @classmethod
    def from_dict(cls, data: dict) -> "WorkerResult":
        """Written by a worker of this very install: a key it does not know is refused by name (``own``)."""
        return from_record(cls, data, "a worker's result", own=True)

    def verdict(self) -> dict:
        """The fields an EvalResult takes over from a candidate job, those the worker set (notes: see ``notes``)."""
        taken = {f.name for f in fields(EvalResult)} - {"status", "reason", "notes"}
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in taken and getattr(self, f.name) is not None}


def labels_text(labels) -> str:
    """Labels for people: each with what it means (``LABELS``)."""
    return "; ".join(f"{label} ({LABELS[label]})" if label in LABELS else label for label in labels)

