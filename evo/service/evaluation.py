"""Evaluation as the search sees it: a pool of evaluations in flight behind the run store, which is the cache (the
same rendered source is evaluated once per run, ever).

``parallel`` evaluations run at once, spread over the evaluators (one per GPU, or one on the CPU interpreter),
each evaluation in its own worker process. Their CPU stages (worker start, static checks, compiling) overlap one
another and the GPU work of others; the evaluator's GPU lock keeps timing exclusive on its GPU.

Where the evaluators live is the ``fitness/backend`` plug-in (``_target_``): ``LocalEvaluators`` here (this host's
GPUs), ``evo.service.evaluation_ray.RayEvaluators`` (one Ray actor per GPU of a cluster). Either builds the same
``EvaluationService``; the store stays the one cache and the one record per kernel.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from kernelevo.core.errors import KernelevoError
from evo.service.evaluation_protocol import RunEvaluator
from evo.plan import RunPlan
from evo.records.store import RunStore
from fitness.evaluation.evaluator import BaselineSlot, Evaluator, sandbox_options
from fitness.evaluation.from_config import fitness_parts
from kernelevo.core.genome import evaluation_key
from fitness.common.gpu_lock import physical_gpu
from kernelevo.core.evaluation_record import CANCELLED, EvalResult
from fitness.workers.pool import SANDBOXES, Lease
from kernelevo.seeds.inductor import inductor_seeds, policy_options
from kernelevo.seeds.inductor.settings import CaptureSettings

log = logging.getLogger(f"kernelevo.{__name__}")


WORKER_CONTEXT_BYTES = 1 << 30  # a worker's CUDA context, caches and allocator slack, generously
COPIES_PER_WORKER = 10  # inputs and outputs a worker holds at once: trial buffers, saved copies, poison, references,
                        # timing input sets (input_sets) and their outputs


SEARCHES_ON_HOST = "KERNELEVO_SEARCHES_ON_HOST"  # set by a bench: how many searches share this host's cores


def host_cores() -> int:
    """The cores this process may run on (its affinity: a container's or a `taskset`'s share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 2


def searches_on_host() -> int:
    """How many searches share this host's cores: a bench's (``SEARCHES_ON_HOST``, its searches at once), else 1."""
    try:
        return max(1, int(os.environ.get(SEARCHES_ON_HOST) or 1))
    except ValueError:
        return 1


def auto_parallel(cpus: int | None = None, gpu_bytes: list[int] = (), searches: int | None = None) -> int:
    """Evaluations in flight when the config says `auto`: all cores but two (for the search and the OS), shared
    among the `searches` on the host (a bench's searches at once: ``searches_on_host``), at least two; on GPUs, no
    more than their workers' contexts fit in 80 % of their memory. Problem-sized memory is admitted apart, a few
    evaluations at a time (`memory_slots`), so the others start, import and compile meanwhile. 16 cores: 14 for one
    search, 7 each for two (what issue 43's benches set by hand: PER_GPU=2 PARALLEL=7)."""
    shared = searches or searches_on_host()
    parallel = max(2, ((cpus or host_cores()) - 2) // shared)
    if gpu_bytes:
        parallel = min(parallel, sum(max(1, int(0.8 * total) // WORKER_CONTEXT_BYTES) for total in gpu_bytes))
    return parallel


def memory_slots(gpu_bytes: int, in_flight: int, problem_bytes: int) -> int | None:
    """How many of one GPU's `in_flight` evaluations may hold problem-sized memory at once: what 80 % of its memory
    holds after every worker's context, at the problem's footprint (the bytes one reference forward reads and
    writes) times the copies a worker holds, at least one; None when all of them fit."""
    room = int(0.8 * gpu_bytes) - in_flight * WORKER_CONTEXT_BYTES
    slots = max(1, room // max(COPIES_PER_WORKER * problem_bytes, 1))
    return None if slots >= in_flight else slots


def admit_problem_memory(evaluator, gpu_bytes: int, in_flight: int) -> None:
    """Give `evaluator` (one GPU's, `in_flight` evaluations at once on it) its memory slots (``memory_slots``); the
    local pool and each Ray actor call this for their own GPU."""
    cost = evaluator.cost
    evaluator.set_memory_slots(memory_slots(gpu_bytes, in_flight, cost.bytes if cost else 0))


def evaluation_devices(device: str, gpus) -> list[str]:
    """The devices to evaluate on: each visible GPU (`gpus`: auto or a count), a named one, or the CPU interpreter."""
    if device == "cpu":
        return ["cpu"]
    import torch

    count = torch.cuda.device_count() if gpus == "auto" else int(gpus)
    return [device] if device.startswith("cuda:") else [f"cuda:{i}" for i in range(max(count, 1))]


def gpu_memory(devices: list[str]) -> list[int]:
    """Total memory of each CUDA device of `devices` (none on the CPU)."""
    if not any(d.startswith("cuda") for d in devices):
        return []
    import torch

    return [torch.cuda.get_device_properties(torch.device(d)).total_memory for d in devices]


def evaluations_in_flight(value, gpu_bytes: list[int] = ()) -> int:
    """The `parallel` setting: evaluations running at once over all devices (`auto`: from the CPU count and, on
    GPUs, how many workers' contexts fit in their memory, `gpu_bytes`: ``gpu_memory``)."""
    if value in (None, "auto"):
        return auto_parallel(gpu_bytes=gpu_bytes)
    if int(value) < 1:
        raise KernelevoError(f"parallel must be at least 1 (evaluations in flight) or auto, got {value}")
    return int(value)


class LocalEvaluator(Evaluator):
    """An evaluator of this host, with what a run asks of every evaluator of its pool beyond judging
    (``RunEvaluator``; the Ray backend's remote evaluators and the replay's recorded ones answer the same calls)."""

    def inductor_seeds(self, run_dir: Path | None = None, variants: dict | None = None,
                       settings: CaptureSettings | None = None) -> dict:
        """torch.compile's kernels for the problem, converted, captured on this evaluator's device and profile:
        made_by -> source, the default seed first, then each variant of Inductor's options that differs."""
        return inductor_seeds(self.problem, self.device, self.profile.name, self.cache_dir, run_dir,
                              variants=variants, settings=settings, **policy_options(self.policy))


class EvaluationService:
    """The evaluators behind the run store. At most `parallel` evaluator calls (evaluate, profile_kernel) run at once,
    whoever makes them (the search's children, the tuner through `submit`, the debugger, the initialiser): each holds
    one of `parallel` slots while it runs in a worker; cache hits and waits on an identical source in flight hold
    none, and no slot is held while waiting on another evaluation. An infrastructure failure (no verdict, for a reason
    the candidate cannot cause: ``EvalResult.infrastructure``) is tried once more, and when that fails too it is
    returned as such, counted (`infrastructure_failures`, and in the store) and never stored as the kernel's verdict:
    asked again, the kernel is evaluated again."""

    def __init__(self, evaluators: list[RunEvaluator], store: RunStore, parallel: int,
                 local_gpus: list[str] | None = None, leases: list[Lease] = ()):
        if not evaluators:
            raise ValueError("the evaluation pool needs at least one evaluator")
        if parallel < 1:
            raise ValueError(f"parallel (evaluations in flight) must be at least 1, got {parallel}")
        self.evaluators = evaluators
        self.leases = list(leases)  # the sandboxes its evaluators run their jobs in, lent by the process's pool
        self.store = store
        self.parallel = parallel
        self.infrastructure_failures = 0  # evaluations of this service that ended with no verdict, after a retry
        self.cut = 0  # evaluations of this service killed while running at the search's budget (cut_at)
        self._slots = threading.BoundedSemaphore(parallel)  # held by every evaluator call while it runs
        self._load = [0] * len(evaluators)  # evaluations in flight per evaluator
        self._guard = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._profiler_noted = False
        self._cut_at: float | None = None  # time.perf_counter() after which no evaluation begins (cut_at)
        self._executor = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="kernelevo-eval")
        # this host's GPUs it evaluates on (NVML index or UUID), for the GPU-busy figure (None: the evaluators' own)
        self.local_gpus = local_gpus if local_gpus is not None else [
            physical_gpu(e.device) for e in evaluators if e.on_gpu]

    @property
    def profile(self):
        return self.evaluators[0].profile

    @property
    def in_flight(self) -> int:
        """Evaluations running in a worker now (cache hits and waits excluded)."""
        with self._guard:
            return sum(self._load)

    def _key_lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._key_locks.setdefault(key, threading.Lock())

    def _call(self, call: Callable[[RunEvaluator], Any]) -> tuple[RunEvaluator, Any]:
        """(evaluator, answer): `call` on the least loaded evaluator, in one of the `parallel` slots (waiting for
        one when all are taken)."""
        with self._slots:
            with self._guard:
                index = min(range(len(self._load)), key=self._load.__getitem__)
                self._load[index] += 1
            try:
                return self.evaluators[index], call(self.evaluators[index])
            finally:
                with self._guard:
                    self._load[index] -= 1

    def cut_at(self, deadline: float | None) -> None:
        """From `deadline` (``time.perf_counter()``) on, evaluations not begun are cut: `evaluate` answers
        ``cancelled`` (never stored: no verdict on the kernel) instead of starting them; and those still running in
        a worker then are killed there and answer ``cancelled`` too (each evaluator's ``cut_running_at``: a local
        one's sandbox, a remote one's actor on its node), counted (`cut`, and in the store). None: no cut."""
        self._cut_at = deadline
        for evaluator in self.evaluators:
            evaluator.cut_running_at(deadline)

    def _cut(self, key: str, label: str) -> EvalResult | None:
        if self._cut_at is None or time.perf_counter() < self._cut_at:
            return None
        return EvalResult(status=CANCELLED, label=label, candidate_hash=key,
                          reason="not evaluated: the search's budget was spent before this evaluation began")

    def evaluate(self, source: str, label: str = "") -> tuple[str, EvalResult]:
        """(evaluation key, result): from the store when this source was evaluated before, else evaluated now in
        the calling thread (or cut: `cut_at`). Identical sources in flight at once wait for one evaluation."""
        key = evaluation_key(source)
        with self._key_lock(key):
            cached = self.store.evaluation(key)
            if cached is not None:
                return key, cached

            def judged(evaluator):  # cut once its turn comes, if the budget was spent meanwhile
                return self._cut(key, label) or evaluator.evaluate(source, label=label)

            cut = self._cut(key, label)
            if cut is not None:
                return key, cut
            _, result = self._call(judged)
            if result.infrastructure:  # not the kernel's doing: once more, in a fresh worker
                _, result = self._call(judged)
            if result.infrastructure:
                self._infrastructure_failure(key, label, result)
            elif result.status != CANCELLED:
                self.store.add_evaluation(key, result)
            elif result.eval_wall_s:  # killed in its worker at the cut (one refused before it began took no time)
                with self._guard:
                    self.cut += 1
                self.store.add_evaluation_cut()
            return key, result

    def _infrastructure_failure(self, key: str, label: str, result: EvalResult) -> None:
        with self._guard:
            self.infrastructure_failures += 1
        self.store.add_infrastructure_failure()
        log.info(f"infrastructure failure, not the kernel's verdict (twice; not stored, evaluated again if "
                 f"asked again): {label or 'kernel'} {key[:12]}: {result.reason.splitlines()[0][:300]}")

    def profile_kernel(self, source: str) -> dict:
        """Profiler metrics of an evaluated kernel (``fitness.profile``; {} when off): from the store when it was
        profiled before, else profiled now (once, however many children ask at the same time) and stored. A run the
        infrastructure failed (twice) is returned, not stored; past the search's cut (`cut_at`) none begins, and
        one running then is killed ({}: nothing stored)."""
        key = evaluation_key(source)
        with self._key_lock(f"profile:{key}"):
            stored = self.store.profile(key)
            if stored is not None:
                return stored
            if self._cut(key, "profile") is not None:  # the search's budget is spent: no profile begins
                return {}
            evaluator, record = self._call(lambda e: e.profile_kernel(source))
            if record.get("infrastructure"):
                evaluator, record = self._call(lambda e: e.profile_kernel(source))
            if record and not record.get("infrastructure"):
                self.store.add_profile(key, record)
            if record.get("note") and evaluator.on_gpu and not self._profiler_noted:  # once: why none
                self._profiler_noted = True
                log.info(f"profiler: {record['note']}")
            return record

    def submit(self, source: str, label: str = "") -> Future:
        """`evaluate` in the pool: a future of (key, result)."""
        return self._executor.submit(self.evaluate, source, label)

    def close(self, completed: bool = False) -> None:
        """Wait for the evaluations in flight and close the evaluators; the sandboxes lent to it go back to the
        process's pool when the run `completed` (its fork servers serve the next run: ``fitness.workers.pool``), and
        are stopped otherwise (an error, Ctrl-C), as a sandbox of its own would be. A run that did not complete
        starts none of the evaluations still queued (an interrupted generation's would run on, one after another)."""
        self._executor.shutdown(wait=True, cancel_futures=not completed)
        for evaluator in self.evaluators:
            evaluator.close()
        for lease in self.leases:
            lease.end(keep=completed)


class LocalEvaluators:
    """``fitness/backend=local`` (the default): one evaluator per GPU of this host (the run's `device` and `gpus`),
    or one on the CPU interpreter, with the run's `parallel` evaluations in flight over them."""

    def service(self, plan: RunPlan, store: RunStore) -> EvaluationService:
        parts = fitness_parts(plan.judge)
        devices = evaluation_devices(parts.device, plan.gpus)
        shared = BaselineSlot()  # eager / torch.compile measured once for the whole pool
        evaluators, leases = leased_evaluators(parts, devices, shared)
        try:
            totals = gpu_memory(devices)
            parallel = evaluations_in_flight(plan.parallel, totals)
            per_device = max(1, -(-parallel // len(devices)))
            for evaluator, total in zip(evaluators, totals):  # problem-sized memory, a few at a time
                admit_problem_memory(evaluator, total, per_device)
            for evaluator in evaluators:  # warm spare workers: enough for every evaluation in flight on a device
                evaluator.set_spares(per_device)
            return EvaluationService(evaluators, store, parallel, leases=leases)
        except BaseException:
            for lease in leases:
                lease.end(keep=False)
            raise


SLOW_START_S = 10.0  # an evaluator that took longer than this to start says where the time went


def said_if_slow(device: str, sandbox_s: float, evaluator_s: float) -> None:
    """A log line when an evaluator's start took more than SLOW_START_S: its sandbox's lease (a fork server started
    or reused) and the evaluator itself (the problem's cost model on the meta device and which inputs the output
    depends on, decided on the CPU), so that a slow start is accounted for (docs/measurements.md)."""
    if sandbox_s + evaluator_s > SLOW_START_S:
        log.info(f"evaluator on {device} started in {sandbox_s + evaluator_s:.1f} s: sandbox {sandbox_s:.1f} s, "
                 f"the problem's cost model and input dependence {evaluator_s:.1f} s")


def leased_evaluators(parts, devices: list[str], baselines: BaselineSlot | None = None) -> tuple[list, list[Lease]]:
    """A ``LocalEvaluator`` of the run's fitness parts per device, each running its jobs in a sandbox leased from
    the process's pool (a warm fork server when an earlier run of this process gave an equal one back), and the
    leases, for the service to end; on an error, the leases made so far are ended."""
    evaluators, leases = [], []
    try:
        for device in devices:
            start = time.perf_counter()
            leases.append(SANDBOXES.lease(device, **sandbox_options(parts.settings, parts.profile, device)))
            leased = time.perf_counter()
            evaluators.append(LocalEvaluator(parts.problem, parts.policy, parts.profile, parts.settings,
                                             device=device, baseline_slot=baselines, sandbox=leases[-1].sandbox))
            said_if_slow(device, leased - start, time.perf_counter() - leased)
    except BaseException:
        for lease in leases:
            lease.end(keep=False)
        raise
    return evaluators, leases
