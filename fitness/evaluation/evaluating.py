"""What every evaluator answers: the one protocol of the judge as its callers see it.

``fitness.evaluation.evaluator.Evaluator`` (this host's sandbox), and the evaluation service's backends built on it
(``evo.service.evaluation.LocalEvaluator``, ``evo.service.evaluation_ray.RemoteEvaluator`` on a Ray actor,
``evo.service.replay. RecordedEvaluator`` from an earlier run's store) all implement it, so a caller never asks an
evaluator what it is (no ``hasattr``): it reads these facts and makes these calls.
``evo.service.evaluation.RunEvaluator`` adds what a run asks beyond judging (its compiler seeds).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fitness.measure.baselines import Baseline
    from fitness.comparison.policy import PrecisionPolicy
    from fitness.problems.problem_spec import ProblemSpec
    from kernelevo.core.evaluation_record import EvalResult
    from fitness.workers.sandbox import Sandbox
    from kernelevo.core.evaluation_record import ProblemCost
    from fitness.problems.target import Target
    from hardware_profiles import HardwareProfile


@runtime_checkable
class Evaluating(Protocol):
    """One problem, one precision policy, one device: candidate sources in, ``EvalResult`` records out."""

    problem: ProblemSpec  # the problem as the caller's process knows it (its seed file, its source text)
    policy: PrecisionPolicy
    profile: HardwareProfile  # the hardware the kernels run on
    device: str  # "cpu" (Triton's interpreter) or a CUDA device of the host that runs the jobs
    on_gpu: bool
    target: Target  # what kernels are written for (shapes, dtypes, which inputs the output depends on)
    cost: ProblemCost | None  # the cost model at the judged sizes (None: not known)
    memory_slots: int | None  # jobs holding problem-sized GPU memory at once (None: all)

    def describe(self) -> str:
        """One line: the problem, its sizes, the policy, where kernels run."""

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        """Judge one candidate source; never raises for anything the candidate does. Thread-safe."""

    def profile_kernel(self, source: str) -> dict:
        """Profiler metrics of a judged candidate ({} when profiling is off; a note when there are none)."""

    def baseline(self) -> Baseline | None:
        """The baselines' times, measured once (None where nothing is measured: a replay)."""

    def baseline_ieee(self, names: list[str]) -> Baseline | None:
        """The compiled baselines `names` timed with IEEE fp32 dot products, measured once: those whose own kernels
        fail a TF32 policy (None off a GPU or under a policy without TF32; a replay answers from its record)."""

    def cut_running_at(self, deadline: float | None) -> None:
        """From `deadline` (``time.perf_counter()`` of this process) on, kill the candidates' jobs still running;
        they answer ``cancelled``. None: no cut."""

    @property
    def sandbox(self) -> Sandbox | None:
        """The open sandbox its jobs run in on this host, to share with another evaluator on the same device
        (None: its jobs run elsewhere, or nowhere)."""

    def close(self) -> None:
        """Stop its workers (and whatever else it holds open)."""
