"""``fitness/backend=replay``: a run's evaluations answered from the run store of an earlier run of the same command,
its stored measurements (no worker process, no GPU).

With the LLM reply cache, a replayed search makes the same requests and the same kernels again, so it comes to the
same lineage and figures without a server: the strategies experiment's tables replay (``experiment=strategies``).
A kernel the record never measured means the replay went another way (another config, code or cache): an error
naming it, never a fresh measurement mixed into recorded ones.
"""
from __future__ import annotations

from pathlib import Path


from kernelevo.core.errors import KernelevoError
from evo.service.evaluation import EvaluationService, LocalEvaluator, evaluations_in_flight, leased_evaluators
from evo.plan import RunPlan
from evo.records.meta import BASELINES_IEEE
from evo.records.store import DB_NAME, RunStore
from fitness.evaluation.from_config import fitness_parts
from kernelevo.core.genome import evaluation_key
from fitness.measure.baselines import OK, Baseline
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure.timing import TimingStats
from kernelevo.seeds.inductor.cache import CapturedSeeds


class ReplayMiss(KernelevoError):
    """The replay asked for a measurement the record does not hold."""


class RecordedEvaluator:
    """An evaluator of the problem (``RunEvaluator``: its problem, target, policy, what a run reads of it, are
    `evaluator`'s) whose verdicts and profiles are the record's."""

    def __init__(self, evaluator: LocalEvaluator, record: RunStore):
        self._evaluator, self._record = evaluator, record
        self.problem, self.policy, self.profile = evaluator.problem, evaluator.policy, evaluator.profile
        self.device, self.on_gpu, self.target = evaluator.device, evaluator.on_gpu, evaluator.target
        self.cost, self.memory_slots = evaluator.cost, evaluator.memory_slots

    @property
    def sandbox(self):
        """The problem's evaluator's (the check at other sizes shares it)."""
        return self._evaluator.sandbox

    def cut_running_at(self, deadline: float | None) -> None:
        """Nothing runs: a recorded verdict is read at once."""

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        key = evaluation_key(source)
        result = self._record.evaluation(key)
        if result is None:
            raise ReplayMiss(f"replay: kernel {key} ({label or 'kernel'}) was never measured in the record "
                             f"{self._record.run_dir}: this run went another way than the recorded one (another "
                             f"config, code version or LLM cache)")
        return EvalResult.from_dict(result.to_dict())

    def profile_kernel(self, source: str) -> dict:
        return self._record.profile(evaluation_key(source)) or {}

    def baseline(self) -> None:
        """Eager and torch.compile are in the recorded verdicts: nothing is measured."""
        return None

    def baseline_ieee(self, names: list[str]) -> Baseline | None:
        """The recorded run's re-timing of `names` with IEEE fp32 dot products (``BASELINES_IEEE`` of its store), as
        it measured them; None where it made none (nothing is measured)."""
        times = {name: seconds for name, seconds in (self._record.get_meta(BASELINES_IEEE) or {}).items()
                 if name in names}
        if not times:
            return None
        stats = {name: TimingStats.from_samples("recorded", [seconds]) for name, seconds in times.items()}
        return Baseline(None, stats.get("compile"), [], stats.get("max_autotune"), dict.fromkeys(times, OK),
                        cached=f"the record {self._record.run_dir}")

    def inductor_seeds(self, run_dir: Path | None = None, variants: dict | None = None,
                       settings=None) -> CapturedSeeds:
        """The recorded run's compiler seeds (its generation 0 made by Inductor), in order (nothing captured)."""
        seeds = {ind.operator: ind.genome.source for ind in self._record.individuals(up_to_generation=0)
                 if ind.operator.startswith("inductor")}
        if not seeds:
            raise ReplayMiss(f"replay: the record {self._record.run_dir} holds no compiler seed")
        return CapturedSeeds(seeds)

    def describe(self) -> str:
        return f"replaying the measurements of {self._record.run_dir} ({self._evaluator.describe()})"

    def close(self) -> None:
        self._record.close()
        self._evaluator.close()


class RecordedEvaluators:
    """``fitness/backend=replay``: `record` is the earlier sweep directory (its run of the same folder name is
    replayed) or one run directory."""

    def __init__(self, record: str):
        self.record = Path(str(record)).expanduser()
        if not self.record.is_dir():
            raise KernelevoError(f"fitness.backend.record={record}: no such directory; pass the sweep (or run) "
                                 f"directory of the run to replay")

    def recorded_run(self, run_dir: Path) -> Path:
        found = self.record if (self.record / DB_NAME).is_file() else self.record / Path(run_dir).name
        if not (found / DB_NAME).is_file():
            raise KernelevoError(f"replay: no recorded run {Path(run_dir).name} in {self.record}: replay with the same "
                                 f"sweep command as the recorded one (its jobs are matched by folder name)")
        return found

    def service(self, plan: RunPlan, store: RunStore) -> EvaluationService:
        parts = fitness_parts(plan.judge)
        record = RunStore(self.recorded_run(store.run_dir), create=False)
        try:
            (evaluator,), leases = leased_evaluators(parts, [parts.device])
        except BaseException:
            record.close()
            raise
        recorded = RecordedEvaluator(evaluator, record)
        return EvaluationService([recorded], store, evaluations_in_flight(plan.parallel), local_gpus=[],
                                 leases=leases)
