"""The evaluation service against a fake evaluator and a real run store: at most `parallel` evaluator calls at once
whoever calls (evaluate, submit, profile_kernel), and infrastructure failures (no verdict, for a reason the candidate
cannot cause) retried once and never served from the store; the fitness layer's classification of job outcomes."""
import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import candidate, make_evaluator
from evo.service.evaluation import EvaluationService
from fakes import PacedEvaluator
from evo.records.store import RunStore
from kernelevo.core.genome import evaluation_key
from kernelevo.core.evaluation_record import INFRASTRUCTURE, EvalResult
from fitness.measure.result import WorkerJob
from fitness.workers.sandbox import JobOutcome, Sandbox
from fitness.workers.zygote import WorkerHandle

LOST = JobOutcome("crashed", None, None, "", 1.0, pid=7, lost=True)  # its fork server died under it
SEGFAULT = JobOutcome("crashed", None, -11, "", 1.0, pid=7, stage="timing the candidate")


def ok() -> EvalResult:
    return EvalResult("ok", time_s=1e-3)


def infrastructure() -> EvalResult:
    return EvalResult(INFRASTRUCTURE, reason=LOST.failure_reason(10))


def crashed() -> EvalResult:
    return EvalResult("crashed", reason=SEGFAULT.failure_reason(10))


@pytest.fixture
def store(tmp_path):
    store = RunStore(tmp_path / "run")
    yield store
    store.close()


def service_of(evaluator: PacedEvaluator, store: RunStore, parallel: int) -> EvaluationService:
    return EvaluationService([evaluator], store, parallel)


# at most `parallel` at once ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("parallel, full_at", [(1, None), (3, 3)])
def test_evaluator_calls_never_exceed_parallel_whoever_makes_them(store, parallel, full_at):
    fake = PacedEvaluator(full_at=full_at)
    service = service_of(fake, store, parallel)
    start = threading.Barrier(8)

    def caller(i: int):
        source = f"kernel_{i} = {i}\n"
        start.wait()
        if i % 3 == 0:
            service.evaluate(source)
        elif i % 3 == 1:
            service.submit(source).result()
        else:
            service.profile_kernel(source)

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(caller, range(8)))
    finally:
        service.close()
    assert sum(fake.calls.values()) == 8
    assert fake.most == parallel  # never more, and the cap is reached (not a stricter one)
    assert service.in_flight == 0


def test_a_wait_on_an_identical_source_in_flight_holds_no_slot(store):
    fake = PacedEvaluator(hold_s=0.0)
    fake.after["x = 1\n"] = "y = 2\n"  # X's evaluation ends once Y's has begun
    service = service_of(fake, store, parallel=2)
    try:
        with ThreadPoolExecutor(3) as pool:
            first = pool.submit(service.evaluate, "x = 1\n")
            assert fake.begun["x = 1\n"].wait(5)
            again = pool.submit(service.evaluate, "x = 1\n")  # waits for the first: no slot of its own
            time.sleep(0.1)
            other = pool.submit(service.evaluate, "y = 2\n")  # takes the second slot
            results = [f.result(timeout=10) for f in (first, again, other)]
    finally:
        service.close()
    assert not fake.gate_timed_out, "Y could not start while X's twin waited: the wait held a slot"
    assert fake.calls == {"x = 1\n": 1, "y = 2\n": 1}
    assert results[0] == results[1]


# infrastructure failures -------------------------------------------------------------------------------------------
def test_an_infrastructure_failure_is_retried_once_and_a_passing_retry_is_cached(store, capsys):
    source = "retried = 1\n"
    fake = PacedEvaluator(hold_s=0.0, verdicts={source: [infrastructure(), ok()]})
    service = service_of(fake, store, parallel=1)
    key, result = service.evaluate(source)
    assert result.ok and fake.calls[source] == 2
    assert store.evaluation(key).ok
    assert service.evaluate(source)[1].ok and fake.calls[source] == 2  # from the store now
    assert service.infrastructure_failures == 0 and store.infrastructure_failures() == 0
    assert "infrastructure" not in capsys.readouterr().out
    service.close()


def test_an_infrastructure_failure_twice_is_reported_as_such_and_never_cached(store, capsys):
    source = "unlucky = 1\n"
    fake = PacedEvaluator(hold_s=0.0, verdicts={source: [infrastructure(), infrastructure()]})
    service = service_of(fake, store, parallel=1)
    key, result = service.evaluate(source)
    assert result.infrastructure and result.status == INFRASTRUCTURE and not result.ok
    assert fake.calls[source] == 2
    assert store.evaluation(key) is None and key not in store.evaluations()
    assert service.infrastructure_failures == 1 and store.infrastructure_failures() == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if "infrastructure" in line]
    assert len(lines) == 1 and "not the kernel's verdict" in lines[0] and key[:12] in lines[0]
    again = service.evaluate(source)[1]  # asked again: evaluated again, and this verdict is kept
    assert again.ok and fake.calls[source] == 3 and store.evaluation(key).ok
    with pytest.raises(ValueError, match="never stored"):
        store.add_evaluation(evaluation_key("other = 1\n"), infrastructure())
    service.close()


def test_a_profiling_run_the_infrastructure_failed_is_not_stored(store):
    source = "profiled = 1\n"
    failed = {"tool": "ncu", "note": "the profiling run failed", "infrastructure": True}
    fake = PacedEvaluator(hold_s=0.0, verdicts={source: [dict(failed), dict(failed)]})
    service = service_of(fake, store, parallel=1)
    assert service.profile_kernel(source).get("infrastructure") and fake.calls[source] == 2
    assert store.profile(evaluation_key(source)) is None
    assert service.profile_kernel(source) == {"tool": "ncu", "kernels": []} and fake.calls[source] == 3
    assert store.profile(evaluation_key(source)) == {"tool": "ncu", "kernels": []}
    service.close()


def test_a_candidate_crashing_its_own_worker_is_its_verdict_and_cached(store):
    source = "segfaults = 1\n"
    fake = PacedEvaluator(hold_s=0.0, verdicts={source: [crashed()]})
    service = service_of(fake, store, parallel=1)
    key, result = service.evaluate(source)
    assert result.status == "crashed" and not result.infrastructure and "SIGSEGV" in result.reason
    assert service.evaluate(source)[1].status == "crashed" and fake.calls[source] == 1
    assert store.evaluation(key).status == "crashed" and service.infrastructure_failures == 0
    service.close()


def test_an_older_stores_not_judged_verdict_is_not_served(store, monkeypatch):
    source = "stored_by_an_older_version = 1\n"
    key = evaluation_key(source)
    old = EvalResult("crashed", reason="the worker process was lost before writing a result: its fork server died "
                                       "(the evaluation was not judged)")
    monkeypatch.setattr(EvalResult, "infrastructure", property(lambda self: False))  # what an older version stored
    store.add_evaluation(key, old)
    monkeypatch.undo()
    assert store.evaluation(key) is None and key not in store.evaluations()
    fake = PacedEvaluator(hold_s=0.0)
    service = service_of(fake, store, parallel=1)
    assert service.evaluate(source)[1].ok and fake.calls[source] == 1
    assert store.evaluation(key).ok  # the verdict replaces the old record
    service.close()


# the fitness layer's classification --------------------------------------------------------------------------------
class _Answers:
    """A sandbox that answers every job with one outcome."""

    def __init__(self, outcome: JobOutcome):
        self.outcome = outcome

    def run(self, job: dict, timeout_s: float, trusted: bool = False, compile_timeout_s=None,
            cut_at=None) -> JobOutcome:
        return self.outcome


class _StuckForkServer:
    """A fork server that never forks: stopping it loses its workers (as the real one's reader reports them)."""

    dead, pid = False, None

    def __init__(self):
        self.handles = []

    def kill(self, handle) -> None:
        pass

    def stop(self) -> None:
        for handle in self.handles:
            handle._lose()

    def log_tail(self, chars: int) -> str:
        return ""


def never_started(monkeypatch, tmp_path) -> JobOutcome:
    """The outcome of a job whose worker the fork server never forked."""
    monkeypatch.setattr("fitness.workers.sandbox.START_TIMEOUT_S", 0.05)
    sandbox, stuck = Sandbox("cpu", spares=0, confine=False), _StuckForkServer()
    (tmp_path / "w1").mkdir()
    handle = WorkerHandle("w1", tmp_path / "w1", trusted=False)
    handle.zygote = sandbox._zygote = stuck
    stuck.handles.append(handle)
    monkeypatch.setattr(sandbox, "_fork", lambda trusted: handle)
    try:
        return sandbox.run(WorkerJob("candidate", "cpu"), timeout_s=5)
    finally:
        sandbox.close()


def job_not_written(monkeypatch, tmp_path) -> JobOutcome:
    """The outcome of a job the sandbox could not write for its worker (its directory is gone)."""
    sandbox = Sandbox("cpu", spares=0, confine=False)
    monkeypatch.setattr(sandbox, "_fork", lambda trusted: WorkerHandle("w1", tmp_path / "gone", trusted=False))
    try:
        return sandbox.run(WorkerJob("candidate", "cpu"), timeout_s=5)
    finally:
        sandbox.close()


CUDA_FAILED = JobOutcome("finished", {"status": "runtime_error", "internal_error": True, "infrastructure": True,
                                      "reason": "evaluation failed outside the candidate: CUDA initialisation "
                                                "failed: out of memory"}, 0, "", 1.0)
OS_EXIT = JobOutcome("crashed", None, 3, "", 1.0, stage="importing the problem and the candidate")
TIMEOUT = JobOutcome("timeout", None, -9, "", 10.0, stage="timing the candidate")


@pytest.fixture(scope="module")
def evaluator():
    with make_evaluator(prestart_worker=False) as ev:
        yield ev


@pytest.mark.parametrize("make, infra, status", [
    (lambda mp, tmp: LOST, True, INFRASTRUCTURE),
    (never_started, True, INFRASTRUCTURE),
    (job_not_written, True, INFRASTRUCTURE),
    (lambda mp, tmp: CUDA_FAILED, True, INFRASTRUCTURE),
    (lambda mp, tmp: SEGFAULT, False, "crashed"),
    (lambda mp, tmp: OS_EXIT, False, "crashed"),
    (lambda mp, tmp: TIMEOUT, False, "timeout"),
], ids=["fork-server-lost", "never-started", "job-not-written", "cuda-init-failed", "segfault", "os-exit", "timeout"])
def test_only_what_the_candidate_cannot_cause_is_an_infrastructure_failure(evaluator, monkeypatch, tmp_path, make,
                                                                           infra, status):
    outcome = make(monkeypatch, tmp_path)
    assert outcome.infrastructure is infra
    monkeypatch.setattr(evaluator, "_sandbox", _Answers(outcome))
    result = evaluator.evaluate(candidate("good"))
    assert (result.status, result.infrastructure) == (status, infra), result.reason
    assert result.reason.endswith("(the evaluation was not judged)") is infra


def test_a_never_started_worker_says_so(monkeypatch, tmp_path):
    outcome = never_started(monkeypatch, tmp_path)
    assert outcome.result is None and outcome.lost and "did not start a worker" in outcome.unstarted
    assert "could not write the job" in job_not_written(monkeypatch, tmp_path).unstarted


# the search's deadline ---------------------------------------------------------------------------------------------
def test_past_the_cut_no_evaluation_begins_and_none_is_stored_but_the_cache_still_answers(store):
    fake = PacedEvaluator(hold_s=0.3)
    service = service_of(fake, store, 1)
    service.evaluate("done = 1\n")
    waiting = service.submit("queued = 1\n")  # waits for the slot the next call takes
    running = service.submit("running = 1\n")
    time.sleep(0.05)
    service.cut_at(time.perf_counter() + 0.1)  # passes while they hold or wait for the one slot
    results = [f.result()[1] for f in (waiting, running)]
    assert sorted(r.status for r in results) == ["cancelled", "ok"]  # the one begun finished, the other was cut
    cut = next(r for r in results if r.status == "cancelled")
    assert store.evaluation(cut.candidate_hash) is None and "budget was spent" in cut.reason
    assert service.evaluate("done = 1\n")[1].status == "ok" and fake.calls["done = 1\n"] == 1  # from the store
    service.cut_at(None)
    assert service.evaluate("later = 1\n")[1].status == "ok"
    service.close()


def test_past_the_cut_no_profile_begins_and_one_killed_at_it_leaves_no_record(store, evaluator, monkeypatch):
    fake = PacedEvaluator(hold_s=0.0)
    service = service_of(fake, store, 1)
    service.cut_at(time.perf_counter() - 1.0)
    assert service.profile_kernel("late = 1\n") == {} and fake.calls["late = 1\n"] == 0  # an LLM child's, too late
    service.cut_at(None)
    assert service.profile_kernel("late = 1\n") == {"tool": "ncu", "kernels": []}  # with no cut it is profiled
    service.close()
    given = []

    class CutWhileProfiling(_Answers):  # ncu still running at the search's cut: its worker killed
        def run(self, job, timeout_s, trusted=False, compile_timeout_s=None, cut_at=None):
            given.append(cut_at)
            return self.outcome

    monkeypatch.setattr(evaluator, "_sandbox", CutWhileProfiling(JobOutcome("cancelled", None, None, "", 1.0)))
    monkeypatch.setattr(evaluator, "settings", dataclasses.replace(evaluator.settings, profile="ncu"))
    monkeypatch.setattr(evaluator, "profiler_note", lambda: "")  # as on a GPU with Nsight Compute
    monkeypatch.setattr("fitness.workers.ncu.readable_paths", lambda tool: [])
    monkeypatch.setattr("fitness.workers.ncu.find_ncu", lambda: "ncu")
    deadline = time.perf_counter() + 60.0
    evaluator.cut_running_at(deadline)
    try:
        assert evaluator.profile_kernel(candidate("good")) == {} and given == [deadline]  # no record: none stored
    finally:
        evaluator.cut_running_at(None)


# closing ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("completed", [False, True])
def test_a_run_that_did_not_complete_starts_none_of_its_queued_evaluations_on_closing(store, completed):
    from fakes import FakeEvaluator

    started, release = [], threading.Event()

    def judge(source: str) -> EvalResult:  # the first evaluation runs until the run is closed
        started.append(source)
        release.wait(timeout=10)
        return ok()

    service = EvaluationService([FakeEvaluator(judge)], store, parallel=1)
    futures = [service.submit(f"x = {i}") for i in range(4)]
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.01)
    threading.Timer(0.2, release.set).start()  # the evaluation in flight ends: closing waits for it
    service.close(completed=completed)  # Ctrl-C (not completed): the three queued are never started
    assert futures[0].result()[1].status == "ok"
    assert started == ([f"x = {i}" for i in range(4)] if completed else ["x = 0"])
    assert all(f.cancelled() for f in futures[1:]) != completed


def test_a_slow_evaluator_start_says_where_its_time_went(caplog):
    # on 2 x H200 level3/37's evaluation service took 185 s before its search, with nothing in its log to say why
    import logging

    from evo.service.evaluation import SLOW_START_S, said_if_slow

    with caplog.at_level(logging.INFO, logger="kernelevo.evo.service.evaluation"):
        said_if_slow("cuda:0", 1.0, SLOW_START_S / 2)
        assert caplog.text == ""
        said_if_slow("cuda:1", 12.25, 16.5)
    assert "evaluator on cuda:1 started in 28.8 s: sandbox 12.2 s, the problem's cost model and input dependence " \
           "16.5 s" in caplog.text
