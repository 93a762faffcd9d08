"""Many evaluations at once through one Evaluator (CPU interpreter): workers forked from one fork server, right
verdicts, a crash or hang costs its own evaluation only, a dead fork server fails waiting evaluations instead of
hanging them, nothing survives an evaluation; and the compile pass's dispatch mode."""
import glob
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import candidate, make_evaluator
from fitness.judge.compile_ahead import NoKernelMode, compile_ahead
from fitness.judge.guards import CompileAbort, LaunchCounter


def record_outcomes(evaluator) -> list:
    """Keep every JobOutcome of the evaluator's sandbox (pids, results) for the test to inspect."""
    outcomes, run, lock = [], evaluator._sandbox.run, threading.Lock()

    def recording_run(*args, **kwargs):
        outcome = run(*args, **kwargs)
        with lock:
            outcomes.append(outcome)
        return outcome

    evaluator._sandbox.run = recording_run
    return outcomes


def group_alive(pgid: int) -> bool:
    """True while a live (not zombie) process is in the process group."""
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = open(stat).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in "ZX":
            return True
    return False


def evaluate_all(evaluator, names: list) -> list:
    with ThreadPoolExecutor(len(names)) as pool:
        return list(pool.map(lambda name: evaluator.evaluate(candidate(name), label=name), names))


def test_concurrent_evaluations_get_right_verdicts_from_one_fork_server():
    names = ["good", "wrong_math", "good", "wrong_math"]
    with make_evaluator(spares=2) as ev:
        outcomes = record_outcomes(ev)
        results = evaluate_all(ev, names)
        zygote = ev._sandbox.zygote_pid
    assert [r.status for r in results] == ["ok", "incorrect", "ok", "incorrect"], [r.reason for r in results]
    assert all(r.label == n for r, n in zip(results, names))
    for r in results:
        assert r.phases_s["import"] == 0 and "fork" in r.phases_s and "cuda_init" in r.phases_s
        assert "wait_shared" in r.phases_s and r.phases_s["trials"] > 0
        (name, start, end), *stages = r.spans  # the evaluation, then its worker's stages, all within it
        assert name == "evaluation" and start < end
        assert {"cuda_init", "setup", "trials"} <= {s[0] for s in stages}
        assert all(start - 60 <= s[1] <= s[2] <= end for s in stages)  # a spare's start-up may precede its job
        assert all(s[1] >= start for s in stages if s[0] in ("setup", "trials", "timing"))
    assert all(r.phases_s["timing"] > 0 for r in results if r.ok)
    assert {o.result["worker"]["forked_by"] for o in outcomes} == {zygote}
    assert len({o.pid for o in outcomes}) == len(names)  # one process per evaluation
    assert not any(group_alive(o.pid) for o in outcomes)


def test_crash_exit_and_hang_cost_their_own_evaluation_only():
    names = ["segfault", "good", "os_exit", "hang", "good"]
    with make_evaluator(static_check=False, timeout_s=10, spares=2) as ev:
        outcomes = record_outcomes(ev)
        results = dict(zip(names[:4], evaluate_all(ev, names)))
        last = results["good"] if results["good"].ok else None
    statuses = {name: r.status for name, r in results.items()}
    assert statuses == {"segfault": "crashed", "good": "ok", "os_exit": "crashed", "hang": "timeout"}, statuses
    assert last is not None and "SIGSEGV" in results["segfault"].reason
    assert not any(group_alive(o.pid) for o in outcomes)  # the hung worker's group was killed


def test_killing_the_fork_server_fails_waiting_evaluations_and_the_next_one_works():
    with make_evaluator(static_check=False, timeout_s=120, spares=0) as ev:
        with ThreadPoolExecutor(2) as pool:
            hung = [pool.submit(ev.evaluate, candidate("hang")) for _ in range(2)]
            deadline = time.monotonic() + 60
            while len(glob.glob(str(ev._sandbox.root / "w*" / "kernelevo_candidate_*.py"))) < 2:
                assert time.monotonic() < deadline, "the hanging candidates never started"
                time.sleep(0.05)
            zygote = ev._sandbox.zygote_pid
            os.kill(zygote, signal.SIGKILL)
            results = [f.result(timeout=60) for f in hung]
        # failed when the fork server died: the 120 s timeout would say "timeout"
        assert [r.status for r in results] == ["infrastructure_error"] * 2  # not the kernels' verdicts
        assert "fork server died" in results[0].reason and results[0].infrastructure
        after = ev.evaluate(candidate("good"))
        assert after.status == "ok", after.reason
        assert ev._sandbox.zygote_pid not in (None, zygote)


# the compile pass ------------------------------------------------------------------------------------------------
def test_no_kernel_mode_allows_allocation_and_views_and_aborts_on_compute():
    x = torch.randn(4, 6)
    with NoKernelMode():
        y = torch.empty_like(x)
        torch.empty(3, 2).view(6).t()
        x.view(6, 4).transpose(0, 1)[1:].unsqueeze(0).expand(2, -1, -1)
        x.new_empty((2, 2))
    assert y.shape == x.shape
    for compute in (lambda: x * 2, lambda: x.clone(), lambda: torch.zeros(3), lambda: x.sum(), lambda: x[0, 0].item()):
        with pytest.raises(CompileAbort), NoKernelMode():
            compute()


class Wrapper(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x)


def swallowing(x):
    try:
        return x + 1
    except BaseException:  # noqa: BLE001 - a candidate that catches everything
        return x


def test_compile_pass_reports_ahead_or_fallback():
    counter, x = LaunchCounter(), torch.randn(8)
    assert compile_ahead(Wrapper(lambda t: torch.empty_like(t).view(2, 4)), [x], counter) == "ahead"
    assert compile_ahead(Wrapper(lambda t: t * 2), [x], counter).startswith("fallback: torch op 'mul'")
    assert compile_ahead(Wrapper(swallowing), [x], counter).startswith("fallback: torch op 'add'")
    assert compile_ahead(Wrapper(lambda t: t.no_such_method()), [x], counter).startswith("fallback: AttributeError")
    assert not counter.compile_only and sum(counter.launches.values()) == 0


class FakeJit:
    """Stands in for a JITFunction under an autotuner: records how it is run."""
    arg_names = ["x_ptr", "n", "BLOCK"]

    def __init__(self):
        self.fn, self.calls = (lambda x_ptr, n, BLOCK: None), []

    def run(self, *args, **kwargs):
        self.calls.append(kwargs)


def test_autotuned_kernel_compiles_every_config_and_chooses_none_in_compile_only_mode():
    import triton

    counter = LaunchCounter()
    counter.install()  # wraps Triton's classes in this (test) process
    fake = FakeJit()
    tuner = triton.autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])(fake)
    with counter.compiling_only():
        tuner.run(torch.empty(8), 8, grid=(1,), warmup=False)
    assert [call["BLOCK"] for call in fake.calls] == [64, 128]
    assert tuner.cache == {} and tuner.nargs is None  # no autotuning choice was made
    assert sum(counter.launches.values()) == 0
