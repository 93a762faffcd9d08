"""The records that cross a worker's process boundary: the job it is sent (``WorkerJob``) and what it writes back
(``WorkerResult``), whose verdict the evaluator turns into the evaluation's record
(``kernelevo.core.evaluation_record``)."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

from kernelevo.core.evaluation_record import EvalResult, Status
from kernelevo.core.records import from_record
from fitness.settings import EvalSettings


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
