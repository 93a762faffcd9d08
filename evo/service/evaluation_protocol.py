"""What a run asks of its evaluators and of its evaluation service: the protocols every backend implements.

``RunEvaluator`` is the judge's protocol (``fitness.evaluation.evaluating.Evaluating``) with what a run asks of an
evaluator beyond judging: torch.compile's kernels for the problem, captured where the evaluator runs. ``LocalEvaluator``
(this host), ``RemoteEvaluator`` (a Ray actor) and ``RecordedEvaluator`` (a replay) implement it. ``Evaluations`` is the
pool the search, the tuner and the seeding call (``EvaluationService``; the tests' fakes implement it too).
"""
from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

from fitness.evaluation.evaluating import Evaluating
from kernelevo.seeds.inductor.cache import CapturedSeeds
from kernelevo.seeds.inductor.settings import CaptureSettings

if TYPE_CHECKING:
    from evo.records.store import RunStore
    from kernelevo.core.evaluation_record import EvalResult
    from hardware_profiles import HardwareProfile


@runtime_checkable
class RunEvaluator(Evaluating, Protocol):
    """An evaluator of a run's pool."""

    def inductor_seeds(self, run_dir: Path | None = None, variants: dict | None = None,
                       settings: CaptureSettings | None = None) -> CapturedSeeds:
        """torch.compile's kernels for the problem, converted (made_by -> source, the default seed first), captured
        on this evaluator's device and profile, with how each capture was got (`cache`); written into `run_dir`
        when given. `settings`: the capture's time (None: its defaults)."""


@runtime_checkable
class Evaluations(Protocol):
    """The evaluators behind the run store, as the search, the tuner and the seeding use them."""

    evaluators: Sequence[RunEvaluator]
    store: RunStore
    parallel: int  # evaluations in flight at most

    @property
    def profile(self) -> HardwareProfile:
        """The hardware the kernels run on (the first evaluator's)."""

    def evaluate(self, source: str, label: str = "") -> tuple[str, EvalResult]:
        """(evaluation key, result): from the store when this source was evaluated before, else evaluated now."""

    def submit(self, source: str, label: str = "") -> Future:
        """`evaluate` in the pool: a future of (key, result)."""

    def profile_kernel(self, source: str) -> dict:
        """Profiler metrics of an evaluated kernel ({} when off)."""

    def cut_at(self, deadline: float | None) -> None:
        """From `deadline` (``time.perf_counter()``) on, no evaluation begins and those running are killed."""

    def close(self, completed: bool = False) -> None:
        """Wait for the evaluations in flight, then close every evaluator; `completed` (the run ended without an
        error): what it leased from the process (warm fork servers, ``fitness.workers.pool``) serves the next run."""
