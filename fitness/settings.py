"""How candidates are judged: the ``fitness`` settings of a run, each with its one default and what it means.

These dataclasses are the schema of ``fitness.*`` (``kernelevo/config/schema.py`` adds the policy and backend choices)
and of ``problem`` (``ProblemSettings``): ``conf/fitness/default.yaml`` holds only group choices, and a key given on the
command line is type-checked against the field here. No torch import: the command line reads this before anything heavy.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from kernelevo.core.errors import KernelevoError

PROFILERS = ("none", "ncu")
# every known baseline, in the order tables show them (what each one is: fitness.baselines)
BASELINES = ("eager", "compile", "max_autotune")


@dataclass
class ProblemSettings:
    """``problem``: a bundled problem (``problem=NAME``) or a KernelBench-format file (``problem=PATH.py``)."""
    name: str = MISSING  # a bundled problem's name (fitness/suite/), or a file's path (problem=file)
    # auto: full sizes on a GPU; on the CPU interpreter a bundled problem's test sizes (suite.yaml), a file's shrunk
    # by the rule of fitness/problems/sizes.py (largest tensor at most 16,384 elements); or full / test
    size_preset: str = "auto"
    sizes: Dict[str, Any] = field(default_factory=dict)  # size-constant overrides, e.g. problem.sizes.batch_size=64
    # seed kernel file; null: the bundled seed (a file has none: torch.compile's Triton kernels); inductor:
    # torch.compile's Triton kernels (kernelevo/seeds/inductor)
    seed: Optional[str] = None


@dataclass
class TimingSettings:
    """``fitness.timing``: how a candidate and its baselines are timed (``fitness.timing``)."""
    warmup_ms: float = 25.0
    rep_ms: float = 100.0  # repetitions sized to take about this long
    min_reps: int = 10
    max_reps: int = 1000
    # the baselines' inputs rotate among this many sets (a candidate's timed calls each get a fresh draw of
    # get_inputs(): a result cached by input content never hits)
    input_sets: int = 3
    checked_calls: int = 5  # this many of a candidate's measured calls, chosen at random, checked against the reference
    flush_l2: bool = True  # flush L2 (2x the profile's L2) before every repetition
    # input sets (with copies and outputs) may take this much of the free device memory, or exactly
    # memory_budget_bytes; fewer sets when they do not fit, said in the result
    memory_fraction: float = 0.8
    memory_budget_bytes: Optional[int] = None
    interpreter_reps: int = 3  # repetitions on the CPU interpreter (wall-clock)


@dataclass
class EvalSettings:
    """``fitness.*``: the judge's settings (correctness trials, guards, timeouts, workers, timing)."""
    trials: int = 5  # correctness trials, each with fresh random inputs from its own seed
    seed: int = 0  # base seed: trial t uses seed+t; parameters are initialised with seed
    timeout_s: float = 120.0  # per candidate evaluation, in its own process
    # per kernel Triton builds for a candidate (ahead, or on its first call): a worker still compiling one after this
    # is killed (status compile_timeout): a kernel builds in seconds, a tile far too large for its warps in minutes
    # (docs/measurements.md); null: only timeout_s
    compile_timeout_s: Optional[float] = 30.0
    baseline_timeout_s: float = 900.0  # one baseline job: the reference's baselines compiled and timed
    # what speed-ups are measured against: eager, compile (torch.compile at its defaults), max_autotune
    # (torch.compile mode max-autotune-no-cudagraphs); TF32 as the policy says; the compiled ones only on a GPU
    baselines: List[str] = field(default_factory=lambda: ["eager", "compile", "max_autotune"])
    # one compiled baseline's compilation (max-autotune benchmarks its choices: minutes): past it, that baseline is
    # reported too slow to compile and the others stand; null: no limit of its own
    baseline_compile_timeout_s: Optional[float] = 300.0
    static_check: bool = True  # reject process/network/FFI/introspection/monkey-patching before running
    require_triton_launch: bool = True
    # after the trials, one trial per input the output depends on with one element changed so far that the
    # reference's output moves far beyond the tolerance: the candidate's output must follow (fitness/judge/coverage.py)
    coverage: bool = True
    # one call on inputs beyond the drawn distribution, for problems whose output depends on an input only there
    # (fitness/judge/probes.py: level2/9's zeros for every rand draw)
    probe_trial: bool = True
    # two calls after the module's parameters changed, in place and by replacement: the output must follow
    # (fitness/judge/parameters.py: a result cached by the weight's pointer)
    parameter_trial: bool = True
    # two calls on a draw and on it with one row's block set to the draw's own top or bottom decile: the candidate's
    # difference of outputs must match the float64 reference's (fitness/judge/differential.py: a guessed normaliser)
    differential_trial: bool = True
    # K of the second opinion on a failed comparison (fitness/judge/rounding.py): the output is compared again against
    # the reference computed in float64, within atol + rtol |exact| + K x the fp32 reference's own rounding error
    # (the rms among elements of about the same magnitude, or each element's spread when the reference's inputs and
    # weights are perturbed by 16 u: an exact rewrite of a long cancelling sum differs from it by that); null: none
    rounding_allowance: Optional[float] = 8.0
    trace_torch_ops: bool = True  # dispatch-mode trace of forward's aten ops on the first trial
    # reject times below plausibility_margin x the data floor (fitness/problems/speed_of_light.py)
    plausibility: bool = True
    plausibility_margin: float = 0.9
    prestart_worker: bool = True  # keep warm spare workers (forked, CUDA initialised) ready for the next jobs
    # how many warm spares per evaluator; null: as many as evaluations in flight on its device (the run's
    # `parallel` over its GPUs; a lone evaluator, as in `kernelevo evaluate`, keeps one)
    spares: Optional[int] = None
    # OS confinement of every worker: own PID, mount and network namespaces, read-only filesystem but its own
    # directory, resource limits (false only where the kernel refuses namespaces and the warning says so)
    confine: bool = True
    # a warm spare runs the judge's own GPU work once (part of its start-up) before its job, so the job's
    # correctness trials do not pay for its first use
    warm_judge: bool = True
    # true: a worker's start-up (its CUDA context, then the judge's warm-up) holds the GPU's shared lock, so none
    # overlaps a timing (one start-up at a time either way); false: they run during timings (more evaluations per
    # hour); null: false where the hardware profile says start-ups do not disturb a timing (its
    # start_up_disturbs_timing: false), else true
    start_up_under_lock: Optional[bool] = None
    timing: TimingSettings = field(default_factory=TimingSettings)
    # profiler feedback for the LLM agents: none, or ncu (Nsight Compute on a GPU: DRAM/SM throughput, occupancy,
    # registers, shared memory, top stalls of the parent and best kernels, each profiled once, in a worker of its
    # own; a note when ncu is missing)
    profile: str = "none"
    profile_timeout_s: float = 300.0  # one kernel's run under the profiler
    # where what outlives a run is kept on this machine (the baselines' times, torch.compile's seeds and their
    # generation-0 verdicts, the baselines' compile cache); null: $XDG_CACHE_HOME/kernelevo (~/.cache/kernelevo).
    # Not part of any cache's key: a cache moved with its folder still hits
    cache_dir: Optional[str] = None

    def __post_init__(self):
        if isinstance(self.timing, dict):  # a partial dict (tests, a stored run): the rest at their defaults
            self.timing = TimingSettings(**self.timing)
        if self.profile not in PROFILERS:
            raise KernelevoError(f"fitness.profile must be one of {PROFILERS}, got {self.profile!r}")
        if self.trials < 1:
            raise KernelevoError(f"fitness.trials must be at least 1, got {self.trials}")
        if self.timeout_s <= 0:
            raise KernelevoError(f"fitness.timeout_s must be positive, got {self.timeout_s}")
        if self.compile_timeout_s is not None and self.compile_timeout_s <= 0:
            raise KernelevoError(f"fitness.compile_timeout_s must be positive (or null for no limit of its own), got "
                                 f"{self.compile_timeout_s}")
        if self.spares is not None and self.spares < 0:
            raise KernelevoError(f"fitness.spares must be at least 0 (or null: one per evaluation in flight), got "
                                 f"{self.spares}")
        self.baselines = list(self.baselines or [])
        if set(self.baselines) - set(BASELINES) or len(set(self.baselines)) < len(self.baselines):
            raise KernelevoError(f"fitness.baselines={self.baselines}: name each baseline once, from {list(BASELINES)} "
                                 f"(e.g. fitness.baselines=[eager,compile] to skip max-autotune)")
        if self.baseline_compile_timeout_s is not None and self.baseline_compile_timeout_s <= 0:
            raise KernelevoError(f"fitness.baseline_compile_timeout_s must be positive (or null for no limit of its "
                                 f"own), got {self.baseline_compile_timeout_s}")
        if self.rounding_allowance is not None and not self.rounding_allowance >= 0:
            raise KernelevoError(f"fitness.rounding_allowance must be at least 0 (K times the fp32 reference's rms "
                                 f"rounding error), or null for no second opinion, got {self.rounding_allowance}")
        checked = self.timing.checked_calls
        if not isinstance(checked, int) or checked < 0:
            raise KernelevoError(f"fitness.timing.checked_calls must be a whole number of at least 0 (timed calls "
                                 f"checked against the reference), got {checked!r}")

    def warm_spares(self, in_flight: int) -> int:
        """Warm workers to keep ready with `in_flight` evaluations at once on one evaluator's device: ``spares``, by
        default (null) one per evaluation in flight; none without ``prestart_worker``."""
        if not self.prestart_worker:
            return 0
        return max(int(in_flight if self.spares is None else self.spares), 0)

    @classmethod
    def migrated(cls, cfg: dict) -> dict:
        """A stored ``fitness`` config with its legacy keys in today's form, read once where a stored run's config
        is typed (``kernelevo.config.schema.run_config``): a run saved before ``fitness.baselines`` has
        ``compile_baseline`` (false: eager only; null: the default)."""
        cfg = dict(cfg)
        if "compile_baseline" in cfg:
            if cfg.pop("compile_baseline") is False:
                cfg["baselines"] = [n for n in cfg.get("baselines", cls().baselines) if n == "eager"]
        return cfg
