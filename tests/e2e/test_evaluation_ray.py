"""`fitness/backend=ray`: one search's evaluations on Ray actors (here a local Ray, one actor on the CPU interpreter)
decide the same as local ones; a missing Ray and a bad address are clear errors."""
import sys
import tempfile
from types import SimpleNamespace

import pytest

from conftest import (assert_lineage_is_sound, kernelevo, kernelevo_in_one_process, lineage_of, log_counts, read_store,
                      replay_measurements)
from kernelevo.core.errors import KernelevoError
from evo.service.ray_cluster import connect

COMMON = ["problem=elementwise_chain", "search=tiny", "search.generations=2", "fitness.trials=1",
          "fitness.timing.interpreter_reps=1"]
RAY = ["fitness/backend=ray", "fitness.backend.gpus=0", "fitness.backend.per_gpu=2", "fitness.backend.address=null",
       "fitness.backend.local_cpus=2"]


@pytest.fixture(scope="module")
def on_ray(tmp_path_factory):
    """The module's two runs on Ray's actors (a local Ray: Ray's driver in a process of its own), one after the other
    in one process: one Python start and one local Ray for both (the first run starts it, the second joins it).
    (folder, the first run's CompletedProcess, the second's)."""
    pytest.importorskip("ray")
    cwd = tmp_path_factory.mktemp("ray")
    chain = ["run", *COMMON, *RAY, "hydra.run.dir=chain"]
    seeds = ["run", "problem=sum_reduction", "problem.seed=inductor", "search=tiny",
             "search.generations=0", "search.tuner.trials=1",  # generation 0 is what the seeds' test asserts, each
             # seed as captured (a drawn tile of 1 x 1 blocks took the interpreter past its 120 s timeout)
             "fitness.trials=1", "fitness.timing.interpreter_reps=1", *RAY, "hydra.run.dir=seeds"]
    return (cwd, *kernelevo_in_one_process(chain, seeds, cwd=cwd))


@pytest.mark.slow
def test_a_run_on_ray_actors_makes_the_same_decisions_as_a_local_one(on_ray, tmp_path):
    """The Ray run's measurements (interpreter times are wall-clock noise) given to a local run: same lineage, same
    best kernel, and the local run asks for no kernel the Ray run did not measure."""
    folder, done, _ = on_ray
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ray (local): 1 evaluator actor(s)" in done.stdout and "evaluated on Ray node" in done.stdout
    assert "2 evaluations and" in done.stdout  # in flight: 1 actor x per_gpu
    ray_dir = folder / "chain"
    measured = replay_measurements(ray_dir, tmp_path / "local")
    assert len(measured) > 2 and all(r.ok for r in measured.values())  # real verdicts came back from the actor
    local = kernelevo("run", *COMMON, "parallel=1", "search.parallel=1",  # the tuner's batches are part of the
                      "hydra.run.dir=local", cwd=tmp_path)                  # search (TPE learns between them): kept
    assert local.returncode == 0, local.stdout + local.stderr
    assert "Ray" not in local.stdout  # the default backend is this host's
    assert lineage_of(tmp_path / "local") == lineage_of(ray_dir)
    assert len(lineage_of(ray_dir)) == 1 + 2 * 2
    assert (tmp_path / "local/best_kernel.py").read_text() == (ray_dir / "best_kernel.py").read_text()
    assert log_counts(tmp_path / "local")[1] == len(measured)
    assert log_counts(ray_dir)[0] == len(measured)  # one record per kernel, in the driver's store
    assert_lineage_is_sound(read_store(ray_dir, lambda store: store.individuals()))


def test_a_missing_ray_says_how_to_install_it_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed (in this process)
    done = kernelevo("run", *COMMON, "fitness/backend=ray", "hydra.run.dir=run", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "fitness/backend=ray needs Ray, which is not installed: pip install 'kernelevo[ray]'" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_bad_address_is_an_error_naming_the_setting(tmp_path):
    ray = pytest.importorskip("ray")
    done = kernelevo("run", *COMMON, "fitness/backend=ray", "fitness.backend.address=127.0.0.1:1",
                     "hydra.run.dir=run", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "fitness.backend.address=127.0.0.1:1: no Ray cluster answers there" in done.stderr
    with pytest.raises(KernelevoError, match="fitness.backend.address='head-node': not HOST:PORT"):
        connect(ray, "head-node", "fitness.backend.address")
    assert not ray.is_initialized()  # nothing was started for a bad address


class FakeRay:
    """ray's init and is_initialized; `address=auto` finds a cluster only when one is `running`."""

    def __init__(self, running: bool):
        self.running, self.addresses = running, []

    def is_initialized(self):
        return False

    def init(self, address=None, **options):
        self.addresses.append(address)
        if address == "auto" and not self.running:
            raise ConnectionError("Could not find any running Ray instance")


def test_address_auto_joins_the_hosts_cluster_or_starts_a_local_ray():
    alone, joined = FakeRay(running=False), FakeRay(running=True)
    assert connect(alone, "auto", "bench.backend.address") == "local" and alone.addresses == ["auto", None]
    assert connect(joined, "auto", "bench.backend.address") == "cluster at auto" and joined.addresses == ["auto"]


class _Method:
    """An actor method as the driver calls it (`.remote(...)`), run at once."""

    def __init__(self, fn):
        self.remote = fn


class _Actor:
    def __init__(self, log: list, name: str, measured):
        self.baseline = _Method(lambda: log.append((name, "measure")) or measured)
        self.set_baseline = _Method(lambda value: log.append((name, "given", value)))


def test_the_baselines_are_measured_once_per_run_and_given_to_every_actor():
    """GPU-only in a real run (the interpreter has no baselines): checked with stand-in actors and ray.get."""
    import pickle
    import threading
    from types import SimpleNamespace

    from evo.service.evaluation_ray import SharedBaseline
    from fitness.evaluation.evaluator import Baseline
    from fitness.measure.timing import TimingStats

    eager = TimingStats("cuda-events", 10, *[1e-3] * 8)
    measured = pickle.loads(pickle.dumps(Baseline(eager, None, ["note"])))  # it travels between nodes
    log = []
    actors = [_Actor(log, f"a{i}", measured) for i in range(3)]
    shared = SharedBaseline(SimpleNamespace(get=lambda refs: refs), actors)
    threads = [threading.Thread(target=shared.get) for _ in range(4)]  # evaluations starting at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert shared.get() == measured and measured.eager.median_s == 1e-3
    assert log == [("a0", "measure"), ("a1", "given", measured), ("a2", "given", measured)]


@pytest.mark.parametrize("device, gpu_gib, problem_gib, expected",
                         [("cuda", 80, 6, 1), ("cuda", 141, 3, 3), ("cpu", 0, 6, None)])
def test_each_actor_admits_problem_sized_memory_on_its_gpu_as_the_local_pool_does(tmp_path, monkeypatch, device,
                                                                                   gpu_gib, problem_gib, expected):
    """14 evaluations at once on an actor's GPU: a 6 GiB problem on 80 GB lets one at a time hold its memory, a 3 GiB
    one on 141 GB three, the local pool's rule (``memory_slots``: 80 % of the GPU less 14 worker contexts, over ten
    copies of the problem); before, Ray actors admitted all 14 at once (issue 29's H200 search). An actor on the CPU
    interpreter admits no memory. GPU-only in a real run: stand-in evaluator."""
    import evo.service.evaluation_ray as er
    from evo.service.evaluation import memory_slots

    class Evaluator:
        def __init__(self, spec, policy, profile, settings, device, baseline_slot):
            self.on_gpu, self.memory_slots = device.startswith("cuda"), None
            self.cost = SimpleNamespace(bytes=problem_gib << 30)

        def set_memory_slots(self, slots):  # the real one's rule: only on a GPU
            self.memory_slots = slots if self.on_gpu and slots else None

    monkeypatch.setattr(er, "LocalEvaluator", Evaluator)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the actor's problem folder, inside the test's
    monkeypatch.setattr(er, "gpu_memory", lambda devices: [gpu_gib << 30 for d in devices if d.startswith("cuda")])
    problem = {"name": "p", "path": str(tmp_path / "p.py"), "sizes": {}, "seed_path": None}
    actor = er.EvaluatorActor(problem, "", None, "cpu_interpreter", None, device, in_flight=14)
    assert actor.evaluator.memory_slots == expected
    if expected:
        assert expected == memory_slots(gpu_gib << 30, 14, problem_gib << 30)


@pytest.mark.slow
def test_compiler_seeds_and_their_variants_are_captured_on_the_actor_and_written_by_the_driver(on_ray):
    """problem.seed=inductor on Ray: the actor captures (on its node and device) and the driver writes every seed
    into its run directory; generation 0 holds the variants after the seed, as in a local run."""
    folder, _, proc = on_ray
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ray (already connected): 1 evaluator actor(s)" in proc.stdout  # the first run's local Ray
    written = sorted(p.name for p in (folder / "seeds").glob("seed_inductor*.py"))
    assert written == ["seed_inductor.py", "seed_inductor_nd_tiling.py"]  # (dynamic shapes, issue 43: one variant)
    first = read_store(folder / "seeds", lambda store: sorted((i.id, i.operator) for i in store.individuals()
                                                            if i.generation == 0))
    assert first == [("0.0", "inductor"), ("0.1", "inductor:nd_tiling")]
