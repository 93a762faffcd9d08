"""A run's evaluations on a Ray cluster (``fitness/backend=ray``): one Ray actor per GPU, each an ordinary evaluator.

Each actor (``EvaluatorActor``, holding one GPU; on a cluster without GPUs, or with ``gpus=0``, one actor on the
CPU interpreter) builds a ``LocalEvaluator`` for the run's problem, policy, profile and settings on its node, so
the sandbox, confinement, timeouts and the admission of problem-sized GPU memory apply there as on this host. The
problem file's text travels with the actor's construction (no shared filesystem needed); the seed kernel is read
here and sent as a candidate source. On the driver, a ``RemoteEvaluator`` per actor answers the evaluator's calls,
and the usual ``EvaluationService`` spreads evaluations over them: the run store on this host stays the one cache
and the one record per kernel. The baselines (eager, torch.compile) are measured once per run, by one actor, and
given to the others before they score anything. Ray is imported only here (through ``evo.service.ray_cluster``), only
when this backend is chosen.
"""
from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path


from kernelevo.core.errors import KernelevoError
from evo.service.evaluation import EvaluationService, LocalEvaluator, admit_problem_memory, gpu_memory
from kernelevo.core.log import configure as configure_logging
from evo.service.ray_cluster import connect, import_ray, placement
from evo.plan import RunPlan
from evo.records.store import RunStore
from fitness.evaluation.evaluator import Baseline, BaselineSlot, EvalSettings
from fitness.evaluation.from_config import problem_spec, profile_for
from fitness.comparison.policy import PrecisionPolicy
from fitness.problems.problem import ProblemSpec
from kernelevo.core.evaluation_record import EvalResult
from kernelevo.seeds.inductor import write_seeds

log = logging.getLogger(f"kernelevo.{__name__}")

SETTING = "fitness.backend"
START_TIMEOUT_S = 600.0  # actors not placed and started by then: the cluster lacks what they ask for
NODE_SOFTWARE = "kernelevo (with torch and triton) must be installed on every node: pip install 'kernelevo[ray]'"


class EvaluatorActor:
    """On a Ray worker: the run's evaluator, built on this node from the problem's text, `in_flight` evaluations at
    once on its GPU, problem-sized memory admitted as the local pool admits it (``admit_problem_memory``)."""

    def __init__(self, problem: dict, problem_text: str, policy: PrecisionPolicy, profile: str,
                 settings: EvalSettings, device: str, in_flight: int):
        configure_logging()  # a process of its own: its notes (the compiler seeds') reach the driver's output
        self._folder = tempfile.mkdtemp(prefix="kernelevo-ray-problem-")
        os.chmod(self._folder, 0o755)  # workers that drop to a user of their own read the problem file too
        path = Path(self._folder) / Path(problem["path"]).name
        path.write_text(problem_text)
        spec = ProblemSpec.from_dict({**problem, "path": str(path), "seed_path": None})
        self._baselines = BaselineSlot()  # filled by this actor's measurement or another actor's (set_baseline)
        self.evaluator = LocalEvaluator(spec, policy, profile_for(profile, device), settings, device=device,
                                        baseline_slot=self._baselines)
        for total in gpu_memory([device]):  # Ray set CUDA_VISIBLE_DEVICES to this actor's GPU: "cuda" is it
            admit_problem_memory(self.evaluator, total, in_flight)

    def facts(self) -> dict:
        """What the driver reads of an evaluator without calling it."""
        import ray

        e = self.evaluator
        return {"device": e.device, "on_gpu": e.on_gpu, "profile": e.profile, "target": e.target, "cost": e.cost,
                "sol_s": e.sol_s, "sizes_used": e.sizes_used, "describe": e.describe(), "memory_slots": e.memory_slots,
                "where": placement(ray.util.get_node_ip_address(), ray.get_gpu_ids())}

    def evaluate(self, source: str, label: str) -> EvalResult:
        return self.evaluator.evaluate(source, label=label)

    def profile_kernel(self, source: str) -> dict:
        return self.evaluator.profile_kernel(source)

    def baseline(self) -> Baseline:
        return self.evaluator.baseline()

    def baseline_ieee(self, names: list[str]) -> Baseline | None:
        return self.evaluator.baseline_ieee(names)

    def cut_at(self, deadline_epoch: float | None) -> None:
        """The search's cut (``time.time()`` on the driver: clocks of one host, or NTP-close ones) as this node's
        ``time.perf_counter()``: candidates' jobs still running then are killed (``Evaluator.cut_running_at``)."""
        self.evaluator.cut_running_at(None if deadline_epoch is None else
                                      time.perf_counter() + deadline_epoch - time.time())

    def set_baseline(self, baseline: Baseline) -> None:
        with self._baselines.lock:
            self._baselines.value = baseline

    def inductor_seeds(self, variants: dict | None = None, settings=None) -> dict:
        return self.evaluator.inductor_seeds(None, variants, settings)

    def close(self) -> None:
        self.evaluator.close()
        shutil.rmtree(self._folder, ignore_errors=True)


class SharedBaseline:
    """The run's baselines: measured by the first actor when first needed, then given to every other actor."""

    def __init__(self, ray, actors: list):
        self._ray, self._actors = ray, actors
        self._lock = threading.Lock()
        self.value: Baseline | None = None

    def get(self) -> Baseline:
        with self._lock:
            if self.value is None:
                value = self._ray.get(self._actors[0].baseline.remote())
                self._ray.get([actor.set_baseline.remote(value) for actor in self._actors[1:]])
                self.value = value
        return self.value


class RemoteEvaluator:
    """The driver's handle on one actor: the evaluator's calls (``RunEvaluator``), answered on the actor's node.
    `problem` and `policy` are the driver's (the seed file and the LLM agents' context are read here)."""

    def __init__(self, ray, actor, problem: ProblemSpec, policy: PrecisionPolicy, facts: dict,
                 baselines: SharedBaseline):
        self._ray, self.actor, self._baselines = ray, actor, baselines
        self.problem, self.policy = problem, policy
        self.device, self.on_gpu, self.profile = facts["device"], facts["on_gpu"], facts["profile"]
        self.target, self.cost, self.sol_s, self.sizes_used = (facts["target"], facts["cost"], facts["sol_s"],
                                                                facts["sizes_used"])
        self.where = facts["where"]
        self.memory_slots = facts["memory_slots"]  # the actor's own, on its GPU (for the start line)
        self._describe = facts["describe"]

    def describe(self) -> str:
        return f"{self._describe}; evaluated on {self.where}"

    @property
    def sandbox(self) -> None:
        """None: its jobs run in the actor's sandbox, on the actor's node."""
        return None

    def _call(self, method, *args):
        try:
            return self._ray.get(method.remote(*args))
        except self._ray.exceptions.RayActorError as exc:  # a lost node or actor is not the kernel's verdict
            raise RuntimeError(f"the evaluator actor on {self.where} was lost ({exc}); the run stops here, with "
                               f"every evaluation so far in its store: `kernelevo resume run_dir=...` continues "
                               f"it") from exc

    def evaluate(self, source: str, label: str = "") -> EvalResult:
        if self.on_gpu:
            self._baselines.get()  # once per run, before any actor scores against it
        return self._call(self.actor.evaluate, source, label)

    def profile_kernel(self, source: str) -> dict:
        return self._call(self.actor.profile_kernel, source)

    def cut_running_at(self, deadline: float | None) -> None:
        """The search's cut (``time.perf_counter()`` here) to the actor, which kills its jobs still running then."""
        epoch = None if deadline is None else time.time() + deadline - time.perf_counter()
        try:
            self._ray.get(self.actor.cut_at.remote(epoch))
        except self._ray.exceptions.RayError:
            pass  # a lost actor runs nothing more: its next call says so

    def baseline(self) -> Baseline:
        return self._baselines.get()

    def baseline_ieee(self, names: list[str]) -> Baseline | None:
        """Measured by this actor (once per machine: its cache), when a run asks it after its search."""
        return self._call(self.actor.baseline_ieee, names)

    def inductor_seeds(self, run_dir: Path | None = None, variants: dict | None = None, settings=None) -> dict:
        """torch.compile's kernels captured on the actor's node and GPU, written into run_dir here."""
        sources = self._call(self.actor.inductor_seeds, variants, settings)
        if run_dir is not None:
            write_seeds(sources, Path(run_dir))
        return sources

    def close(self) -> None:
        try:
            self._ray.get(self.actor.close.remote())
        except self._ray.exceptions.RayError:
            pass  # gone already: nothing of it to close
        self._ray.kill(self.actor)


class RayEvaluators:
    """``fitness/backend=ray``: `gpus` actors of one GPU each on the cluster at `address` (auto: every GPU of the
    cluster; 0: one actor on the CPU interpreter), `per_gpu` evaluations at once on each (its warm spare workers
    too; problem-sized memory admitted on each GPU as locally). `address`: auto = the cluster this host belongs to
    (`ray start`), else a local Ray; HOST:PORT = that cluster's head; null = a local Ray of `local_cpus` CPUs (null:
    all). The run's device, gpus and parallel settings do not apply."""

    def __init__(self, address: str | None = "auto", gpus: int | str = "auto", per_gpu: int = 4,
                 local_cpus: int | None = None):
        if gpus != "auto" and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
            raise KernelevoError(f"{SETTING}.gpus={gpus!r}: a count of GPU actors, auto (every GPU of the cluster) or "
                                 f"0 (one actor on the CPU interpreter)")
        if isinstance(per_gpu, bool) or not isinstance(per_gpu, int) or per_gpu < 1:
            raise KernelevoError(f"{SETTING}.per_gpu={per_gpu!r}: evaluations at once on each actor, at least 1")
        self.address, self.gpus, self.per_gpu, self.local_cpus = address, gpus, per_gpu, local_cpus
        self._ray = import_ray("fitness/backend=ray")

    def _gpu_actors(self, where: str) -> int:
        have = int(self._ray.cluster_resources().get("GPU", 0))
        if self.gpus == "auto" and not have:
            raise KernelevoError(f"the Ray cluster ({where}) has no GPU: start Ray on GPU nodes, or set "
                                 f"{SETTING}.gpus=0 to evaluate on one actor on the CPU interpreter")
        if self.gpus != "auto" and self.gpus > have:
            raise KernelevoError(f"{SETTING}.gpus={self.gpus}, but the Ray cluster ({where}) has {have} GPUs: ask for "
                                 f"at most {have}, or auto")
        return have if self.gpus == "auto" else self.gpus

    def _start(self, actors: list, where: str) -> list[dict]:
        """The actors' facts once every one is up; a clear error (and no actor left) when one cannot start."""
        ray = self._ray
        pending = [actor.facts.remote() for actor in actors]
        try:
            ready, _ = ray.wait(pending, num_returns=len(pending), timeout=START_TIMEOUT_S)
            if len(ready) < len(pending):
                raise KernelevoError(f"{len(pending) - len(ready)} of {len(actors)} evaluator actors were not started "
                                     f"on the Ray cluster ({where}) within {START_TIMEOUT_S:.0f} s: each asks for one "
                                     f"GPU (none with {SETTING}.gpus=0) and one CPU; ask for fewer ({SETTING}.gpus)")
            return ray.get(pending)
        except ray.exceptions.RayError as exc:
            self._kill(actors)
            raise KernelevoError(f"an evaluator actor could not start on the Ray cluster ({where}): {exc}\n"
                                 f"({NODE_SOFTWARE})") from exc
        except KernelevoError:
            self._kill(actors)
            raise

    def _kill(self, actors: list) -> None:
        for actor in actors:
            self._ray.kill(actor)

    def service(self, plan: RunPlan, store: RunStore) -> EvaluationService:
        ray = self._ray
        where = connect(ray, self.address, f"{SETTING}.address", self.local_cpus)
        gpus = self._gpu_actors(where)
        device = "cuda" if gpus else "cpu"  # an actor sees only its own GPU (Ray sets CUDA_VISIBLE_DEVICES)
        problem = problem_spec(plan.judge.problem, device)  # the size preset follows the actors' device
        policy, settings = plan.judge.policy, plan.judge.settings
        settings = replace(settings, spares=settings.warm_spares(self.per_gpu))
        actor_class = ray.remote(num_gpus=1 if gpus else 0, num_cpus=1,
                                 max_concurrency=self.per_gpu + 2)(EvaluatorActor)
        text = Path(problem.path).read_text()
        actors = [actor_class.remote(problem.to_dict(), text, policy, str(plan.judge.profile), settings, device,
                                     self.per_gpu) for _ in range(max(gpus, 1))]
        facts = self._start(actors, where)
        baselines = SharedBaseline(ray, actors)
        evaluators = [RemoteEvaluator(ray, a, problem, policy, f, baselines) for a, f in zip(actors, facts)]
        log.info(f"Ray ({where}): {len(actors)} evaluator actor(s) on "
                 f"{', '.join(e.where for e in evaluators)}; {self.per_gpu} evaluations at once on each")
        return EvaluationService(evaluators, store, len(actors) * self.per_gpu, local_gpus=[])
