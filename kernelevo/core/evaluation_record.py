"""The record of one evaluation (``EvalResult``), its status (``Status``) and the vocabulary every reader of a verdict
shares (the statuses' groups, the labels a verdict can carry). The ground floor: the judge (``fitness``) makes it, the
search, the store and the reports (``evo``) read it, and it imports none of them. Its text for people (``brief``,
``summary``) is the judge's: ``fitness.measure.verdict_text``.

The record is kept as its fields (``to_dict``: the status as its plain value): the run store, summary.json and every
page hold that form, and ``from_dict`` reads any of them back by the one rule of ``kernelevo.core.records``."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum

from kernelevo.core.records import from_record


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
                             f"(kernelevo.core.evaluation_record.Status)") from None


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


@dataclass(frozen=True)
class ProblemCost:
    """Bytes and FLOPs of one reference forward (``fitness.problems.speed_of_light`` measures it): the cost model of an
    evaluation's problem at its sizes, kept in its record (``EvalResult.cost``)."""
    flops: float
    bytes: int
    dtype: str  # peak-table key of the widest floating input: fp32, fp16, bf16, fp8
    data_bytes: int | None = None  # what the output depends on, read once, and the output written (None: unknown)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ProblemCost":
        return from_record(cls, data, "an evaluation's cost")


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
    sizes: dict[str, int] = field(default_factory=dict)  # the problem's size constants judged at
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
    # baseline -> ok, failed, compile_timeout, not_measured
    baseline_status: dict[str, str] = field(default_factory=dict)
    # compiled baseline -> the library kernels (cuBLAS, cuDNN) its Inductor code calls, [] for none; a baseline not
    # named: not known (not compiled here, or measured before this was recorded)
    # (fitness.measure.baselines.library_kernels)
    baseline_library: dict[str, list[str]] = field(default_factory=dict)
    # two speed-of-light figures (fitness.problems.speed_of_light): the reference algorithm's roofline (max(all bytes
    # over bandwidth, the reference's FLOPs over peak): reported only, over 100 % for an algorithm cheaper than the
    # reference's; what sol_* meant in every earlier store) and the data floor (what the output depends on, read
    # once, and the output written, over bandwidth: the plausibility bound; absent from stores before issue 41)
    sol_s: float | None = None
    sol_fraction: float | None = None
    floor_s: float | None = None
    floor_fraction: float | None = None
    cost: ProblemCost | None = None  # the problem's cost model at its sizes (None: not known; stored as {})
    timing: dict = field(default_factory=dict)  # full TimingStats of candidate / eager / compile / max_autotune
    notes: list[str] = field(default_factory=list)
    eval_wall_s: float = 0.0
    input_seed: int | None = None  # the secret seed of the correctness and timing inputs (reproduction)
    # where the worker's time went: import, idle, setup, trials, ...
    phases_s: dict[str, float] = field(default_factory=dict)
    spans: list = field(default_factory=list)  # [stage, wall start, wall end]: the evaluation and its worker's stages
    log_tail: str = ""

    def __post_init__(self):
        self.reason = trim_text(self.reason)
        if isinstance(self.cost, dict):  # read back: {} (not known), else its fields
            self.cost = ProblemCost.from_dict(self.cost) if self.cost else None

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
        """Its fields, the status as its plain value and a cost not known as {} (as every stored record has them):
        what the run store, summary.json and every page keep."""
        return {**asdict(self), "status": self.status.value, "cost": self.cost.to_dict() if self.cost else {}}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict, where: str = "a stored verdict") -> "EvalResult":
        return from_record(cls, data, where)


def labels_text(labels) -> str:
    """Labels for people: each with what it means (``LABELS``)."""
    return "; ".join(f"{label} ({LABELS[label]})" if label in LABELS else label for label in labels)

