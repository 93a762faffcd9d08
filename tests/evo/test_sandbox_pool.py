"""The process's pool of warm sandboxes (fitness/workers/pool.py): a completed run's fork server serves the next equal
lease in a fresh sandbox's state; a failed run's, a dead one and every one at close_all are stopped."""
import os
import time
from pathlib import Path
from types import SimpleNamespace

from evo.records.store import RunStore
from evo.service.evaluation import EvaluationService
from fakes import FakeEvaluator
from fitness.measure.result import WorkerJob
from fitness.workers.pool import SandboxPool, pool_key
from fitness.workers.sandbox import Sandbox

PREWARM = WorkerJob("prewarm", "cpu")  # the cheapest job: a worker forked, "skipped" on the interpreter


def alive(pid: int) -> bool:
    """A live (not zombie) process; the fork servers are this process's children, so reaped ones are gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()


def gone(pid: int, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    return not alive(pid)


def test_what_makes_fork_servers_differ_is_the_key_and_secrets_and_the_test_runners_variables_are_not():
    env = {"PATH": "/usr/bin", "TRITON_INTERPRET": "1"}
    key = pool_key("cpu", Path("/c"), True, "python", env)
    assert key == pool_key("cpu", Path("/c"), True, "python",
                           {**env, "OPENAI_API_KEY": "sk-1", "PYTEST_CURRENT_TEST": "t.py::a (call)"})
    for other in (pool_key("cuda:0", Path("/c"), True, "python", env), pool_key("cpu", Path("/d"), True, "python", env),
                  pool_key("cpu", Path("/c"), False, "python", env), pool_key("cpu", Path("/c"), True, "py2", env),
                  pool_key("cpu", Path("/c"), True, "python", {**env, "OMP_NUM_THREADS": "1"})):
        assert other != key


def test_a_given_back_fork_server_serves_the_next_equal_lease_in_a_fresh_sandboxs_state_until_close_all():
    pool = SandboxPool()
    try:
        first = pool.lease("cpu", spares=1, base_env={**os.environ, "PYTEST_CURRENT_TEST": "a", "MY_API_KEY": "k-1"})
        sandbox = first.sandbox
        done = sandbox.run(PREWARM, timeout_s=60)
        zygote = sandbox.zygote_pid
        assert done.status == "finished" and len(sandbox._pool) == 1 and sandbox._pool[0].forked.wait(60)
        spare = sandbox._pool[0].pid
        first.end(keep=True)  # the run completed: back in the pool, its spare killed, its fork server up
        assert not first.warm and pool.idle == [sandbox] and sandbox.zygote_pid == zygote and alive(zygote)
        assert gone(spare) and children(zygote) == [] and sandbox._pool == []
        assert [p.name.split("-")[0] for p in sandbox.root.iterdir()] == ["zygote"]  # no worker's directory left
        first.end(keep=False)  # a lease ends once
        assert pool.idle == [sandbox] and alive(zygote)

        other = pool.lease("cpu", base_env={**os.environ, "KERNELEVO_POOL_TEST": "other"})  # another environment
        assert other.sandbox is not sandbox and not other.warm
        other.end(keep=True)  # its fork server never started: nothing worth keeping
        assert pool.idle == [sandbox] and other.sandbox._closed

        env = {**os.environ, "PYTEST_CURRENT_TEST": "b", "MY_API_KEY": "k-2"}
        again = pool.lease("cpu", spares=0, base_env=env)
        assert again.warm and again.sandbox is sandbox and pool.idle == []
        assert sandbox.base_env == env and sandbox.spares == 0  # the lessee's environment and spares
        second = sandbox.run(PREWARM, timeout_s=60)
        assert second.result["worker"]["forked_by"] == zygote and second.pid != done.pid  # a fresh worker
        pool.close_all()  # the interpreter's exit, with the sandbox still lent
        assert gone(zygote) and pool.idle == []
        again.end(keep=True)  # a lease ended after close_all gives back nothing
        assert pool.idle == []
    finally:
        pool.close_all()


def test_a_failed_runs_fork_server_is_stopped_and_a_dead_one_is_never_given_back():
    pool = SandboxPool()
    try:
        failed = pool.lease("cpu", spares=0)
        assert failed.sandbox.run(PREWARM, timeout_s=60).status == "finished"
        zygote = failed.sandbox.zygote_pid
        failed.end(keep=False)  # an error or Ctrl-C in the run: stopped, as a sandbox of its own
        assert gone(zygote) and pool.idle == [] and not failed.sandbox.root.exists()

        dead = pool.lease("cpu", spares=0)
        assert not dead.warm
        dead.sandbox._zygote = SimpleNamespace(dead=True, in_flight=0, stop=lambda: None)
        dead.end(keep=True)
        assert pool.idle == [] and dead.sandbox._closed
    finally:
        pool.close_all()


def test_at_most_the_idle_limit_is_kept_the_least_recently_given_back_stopped_first(monkeypatch):
    monkeypatch.setattr(Sandbox, "reset", lambda self: True)  # as if each had its fork server up
    pool = SandboxPool(idle_limit=2)
    leases = [pool.lease("cpu", base_env={"KERNELEVO_POOL_TEST": str(i)}) for i in range(3)]
    for lease in leases:
        lease.end(keep=True)
    assert pool.idle == [leases[1].sandbox, leases[2].sandbox] and leases[0].sandbox._closed
    assert pool.lease("cpu", base_env={"KERNELEVO_POOL_TEST": "1"}).sandbox is leases[1].sandbox
    pool.close_all()
    assert all(lease.sandbox._closed for lease in leases) and pool.idle == []


def test_the_service_gives_its_leases_back_only_for_a_completed_run(monkeypatch, tmp_path):
    """``execute`` closes its service with `completed` only when the run ended without an error (Ctrl-C included)."""
    monkeypatch.setattr(Sandbox, "reset", lambda self: True)  # as if its fork server were up
    pool, store = SandboxPool(), RunStore(tmp_path / "run")
    try:
        for completed in (False, True):
            lease = pool.lease("cpu", base_env={"KERNELEVO_POOL_TEST": "service"})
            evaluator = FakeEvaluator()
            service = EvaluationService([evaluator], store, 1, leases=[lease])
            if completed:
                service.close(completed=True)
            else:
                service.close()  # the default: a caller that does not say stops what it leased
            assert evaluator.closed and lease.ended
            assert pool.idle == ([lease.sandbox] if completed else []) and lease.sandbox._closed is not completed
    finally:
        pool.close_all()
        store.close()
