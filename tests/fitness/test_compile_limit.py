"""No evaluation waits on a compile: a worker still building one kernel after fitness.compile_timeout_s is killed
(status compile_timeout, one of COMPILE_FAILURES), each build timed on its own; and the compile pass runs on meta
tensors, needing no device memory, with a device pass only where forward cannot run on meta tensors."""
import os
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from conftest import candidate, make_evaluator
from kernelevo.core.errors import KernelevoError
from fitness.judge.compile_ahead import compile_pass, meta_copy, meta_like, meta_pass
from fitness.evaluation.evaluator import EvalSettings
from fitness.judge.guards import LaunchCounter
from fitness.judge.inputs import make_inputs, meta_inputs
from fitness.problems.problem import load_problem, resolve_problem
from kernelevo.core.evaluation_record import COMPILE_FAILURES, STATUSES
from fitness.workers.job_clock import CompileClock
from fitness.workers.sandbox import Sandbox
from fitness.common.stage import COMPILE_STAGE, STAGE_FILE, CompileStage, stage
from fitness.workers.zygote import WorkerHandle


# the compile time limit ------------------------------------------------------------------------------------------
def test_the_compile_clock_times_each_build_and_nothing_else():
    clock, first, second = CompileClock(30), f"{COMPILE_STAGE}: build 1, k", f"{COMPILE_STAGE}: build 2, k"
    assert not clock.overdue("correctness trial 1/5", 0) and not clock.overdue("correctness trial 1/5", 100)
    assert not clock.overdue(first, 100) and not clock.overdue(first, 130)
    assert clock.overdue(first, 130.5)
    assert not clock.overdue(second, 131) and not clock.overdue(second, 160)  # a new build: its own 30 s
    assert not clock.overdue(COMPILE_STAGE, 161) and clock.overdue(COMPILE_STAGE, 191.5)  # a pass Triton did not report


def test_the_stage_is_read_without_waiting_on_whatever_candidate_code_left_in_its_place(tmp_path):
    handle = WorkerHandle("w1", tmp_path, trusted=False)
    assert Sandbox._stage(handle) == ""  # none yet
    handle.stage_path.write_text(f"{COMPILE_STAGE}: build 1, k" + "x" * 1000)
    assert Sandbox._stage(handle) == (f"{COMPILE_STAGE}: build 1, k" + "x" * 1000)[:200]
    handle.stage_path.unlink()
    os.mkfifo(handle.stage_path)  # opening a FIFO to read would wait for a writer
    assert Sandbox._stage(handle) == ""
    handle.stage_path.unlink()
    handle.stage_path.symlink_to("/etc/hostname")
    assert Sandbox._stage(handle) == ""


def test_the_worker_names_each_build_and_then_says_again_what_it_was_doing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    said = lambda: (tmp_path / STAGE_FILE).read_text()  # noqa: E731
    report = CompileStage()
    stage("correctness trial 1/5")
    report("k (num_warps=1)")
    assert said() == f"{COMPILE_STAGE}: build 1, k (num_warps=1), on its first call (correctness trial 1/5)"
    report(None)
    assert said() == "correctness trial 1/5"
    stage(COMPILE_STAGE)
    report("k (num_warps=2)")
    assert said() == f"{COMPILE_STAGE}: build 2, k (num_warps=2)"
    report(None)
    assert said() == COMPILE_STAGE


def test_the_launch_counter_reports_every_triton_build_even_a_failing_one():
    seen = []

    def build(src, target=None, options=None):
        seen.append(("built", src.name))
        if src.name == "broken":
            raise RuntimeError("ptxas failed")
        return src.name

    compiler, counter = SimpleNamespace(compile=build), LaunchCounter()
    counter._wrap_compile(compiler)
    assert compiler.compile(SimpleNamespace(name="k"), target="cuda", options={"num_warps": 4}) == "k"  # no listener
    counter.on_compile = seen.append
    compiler.compile(SimpleNamespace(name="k"), target="cuda", options={"num_warps": 4})
    with pytest.raises(RuntimeError):
        compiler.compile(SimpleNamespace(name="broken"), options={"num_warps": 8})
    assert seen == [("built", "k"), "k (num_warps=4)", ("built", "k"), None, "broken (num_warps=8)",
                    ("built", "broken"), None]


def test_a_worker_still_compiling_after_the_limit_is_killed_with_a_reason_naming_the_limit(sandbox):
    # it imports fitness; the pytest worker's fork server (the limit kills the worker alone)
    with make_evaluator(compile_timeout_s=1.0, timeout_s=60, static_check=False, sandbox=sandbox) as ev:
        result = ev.evaluate(candidate("endless_compile"))
    assert result.status == "compile_timeout" and result.status in COMPILE_FAILURES, result.reason  # not "timeout"
    assert "build 1, endless_kernel (num_warps=1)" in result.reason and "after 1 s" in result.reason
    assert "fitness.compile_timeout_s=1" in result.reason and "raise fitness.compile_timeout_s" in result.reason


def test_compile_statuses_and_settings():
    assert COMPILE_FAILURES == {"compile_error", "compile_timeout"} and COMPILE_FAILURES <= set(STATUSES)
    assert EvalSettings(compile_timeout_s=None).compile_timeout_s is None  # no limit but timeout_s
    with pytest.raises(KernelevoError, match="fitness.compile_timeout_s must be positive"):
        EvalSettings(compile_timeout_s=0)


# the compile pass on meta tensors --------------------------------------------------------------------------------
def describe(t: torch.Tensor) -> tuple:
    return t.dtype, tuple(t.shape), t.stride(), t.storage_offset()


def test_a_meta_tensor_keeps_dtype_shape_strides_and_the_16_byte_alignment_triton_specialises_on():
    base = torch.randn(64, 48)
    for view in (base, base[1:], base[:, 3:], base.t(), base[2:, 5:].t(), base.to(torch.float16)[1:, 1:]):
        meta = meta_like(view)
        assert meta.is_meta and describe(meta) == describe(view)
        assert meta.data_ptr() % 16 == view.data_ptr() % 16


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.register_buffer("scale", torch.ones(4))
        self.table = torch.arange(6.0).view(2, 3).t()  # a plain tensor attribute, not contiguous
        self.note = {"k": 1}


def test_the_compile_pass_copies_the_model_onto_the_meta_device_and_leaves_the_judged_one_alone():
    net = Net()
    copy = meta_copy(net)
    assert all(p.is_meta for p in copy.parameters()) and copy.scale.is_meta and copy.table.is_meta
    assert isinstance(copy.lin.weight, nn.Parameter) and copy.lin.weight.requires_grad
    assert describe(copy.table) == describe(net.table) and describe(copy.lin.weight) == describe(net.lin.weight)
    assert not any(p.is_meta for p in net.parameters()) and not net.table.is_meta
    assert copy.note == {"k": 1} and copy.note is not net.note


@pytest.mark.parametrize("name", ["row_softmax", "small_attention", "maxpool2d"])
def test_meta_inputs_are_what_make_inputs_makes_without_memory(name):
    problem = load_problem(resolve_problem(name, size_preset="test"))
    real, meta = make_inputs(problem, 0, "cpu"), meta_inputs(problem)
    assert all(x.is_meta for x in meta) and [describe(x) for x in meta] == [describe(x) for x in real]


class Body(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def picky(t):
    if t.is_meta:
        raise RuntimeError("needs a real tensor")
    return torch.empty_like(t)


def test_the_device_pass_runs_only_where_forward_cannot_run_on_meta_tensors():
    counter, calls, x = LaunchCounter(), [], torch.randn(8)

    def device_pass(fn):
        def make():
            calls.append(fn)
            return Body(fn), [x.clone()]
        return make

    def meta(fn):
        return meta_pass(Body(fn), lambda: [x.to("meta")])

    empty = torch.empty_like
    assert compile_pass(meta(empty), device_pass(empty), counter) == "ahead" and calls == []
    aborted = compile_pass(meta(lambda t: t * 2), device_pass(empty), counter)
    assert aborted.startswith("fallback: torch op 'mul'") and calls == []  # it would abort any pass
    retried = compile_pass(meta(picky), device_pass(picky), counter)
    assert retried == "ahead (on device tensors: RuntimeError: needs a real tensor)" and calls == [picky]

    def no_meta_inputs():
        raise RuntimeError("get_inputs called .item()")

    how = compile_pass(meta_pass(Body(empty), no_meta_inputs), device_pass(empty), counter)
    assert how == "ahead (on device tensors: on the meta device: RuntimeError: get_inputs called .item())"

    def cannot_copy():
        raise TypeError("cannot pickle")

    assert compile_pass(meta(picky), cannot_copy, counter) == "fallback: the model could not be copied: TypeError: " \
                                                              "cannot pickle"
    assert not counter.compile_only and sum(counter.launches.values()) == 0


def test_with_memory_slots_the_pass_runs_first_on_a_model_built_on_the_meta_device():
    from fitness.judge.compile_ahead import compile_before_memory

    counter, x = LaunchCounter(), torch.randn(8)
    on_meta = lambda: [x.to("meta")]  # noqa: E731
    assert compile_before_memory(lambda: Body(torch.empty_like), on_meta, counter) == "ahead"
    assert compile_before_memory(lambda: Body(lambda t: t * 2), on_meta, counter).startswith(
        "fallback: torch op 'mul'")  # final: a device pass would abort alike

    def no_model():
        raise RuntimeError("the constructor called .cuda()")

    assert compile_before_memory(no_model, on_meta, counter) is None  # built on the device, compiled there
    assert compile_before_memory(lambda: Body(picky), on_meta, counter) is None  # forward needs real tensors
    assert sum(counter.launches.values()) == 0
