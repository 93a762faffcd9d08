"""Issue 45: a bench problem's fresh process (interpreter, imports, config: 11-15 s per problem on an H200 bench with
warm caches) is started while the GPU's previous search runs, and waits at a gate before its first GPU work, so a
GPU still runs one search at a time and that start-up leaves the GPU's critical path."""
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from evo.benchmark import bench
from evo.runs.start_gate import START_GATE, open_gate, wait_for_gate


def test_a_prestarted_process_waits_at_its_gate_until_the_bench_opens_it(tmp_path, monkeypatch):
    gate = tmp_path / "gates" / "p"
    code = "from evo.runs.start_gate import wait_for_gate; print(round(wait_for_gate(), 2))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, START_GATE: str(gate)})
    try:
        time.sleep(1.5)
        assert proc.poll() is None  # still waiting: its run has not begun
        open_gate(gate)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and float(out) >= 1.0
    monkeypatch.delenv(START_GATE, raising=False)
    assert wait_for_gate() == 0.0  # no gate: a run of its own begins at once


class FakeProc:
    def __init__(self, name, events):
        self.name, self.events = name, events

    def wait(self, timeout=None):
        self.events.append(("waited", self.name))
        return 0


def fake_bench(monkeypatch, events, gpus, interrupt_after=None, sharing=None):
    """launch/finish replaced by fakes recording their order; `interrupt_after`: finish of that task interrupts;
    `sharing`: a list that gets each launch's searches sharing the host."""
    monkeypatch.setattr(bench, "visible_gpus", lambda: gpus)

    def launch(task, bench_dir, gpu, searches, gated=False, threads=None, sharing=1):
        events.append(("launch", task.name, gated))
        shared.append(sharing)
        gate = Path(bench_dir) / bench.GATES / task.slug if gated else None
        return bench.Launched(FakeProc(task.name, events), time.time(), Path(bench_dir) / "log", gate)

    def finish(task, launched, bench_dir, gpu, timeout_s, searches):
        assert launched.gate is None or launched.gate.exists()  # a gated search finishes only once let in
        events.append(("finish", task.name))
        if task.name == interrupt_after:
            searches.interrupt()
        return bench.Row(task.name, "ok", "", 1.0, gpu or "")

    shared = sharing if sharing is not None else []
    monkeypatch.setattr(bench, "launch", launch)
    monkeypatch.setattr(bench, "finish", finish)


TASKS = [bench.BenchTask(n, n) for n in ("a", "b", "c")]


def test_every_search_is_told_how_many_searches_share_the_host(tmp_path, monkeypatch):
    events, sharing = [], []
    fake_bench(monkeypatch, events, ["0", "1"], sharing=sharing)
    bench.LocalBackend(per_gpu=2).run(TASKS, tmp_path, lambda t, row: None)
    assert sharing == [4, 4, 4]  # two GPUs, two searches each: their evaluations in flight share the cores by four


def test_each_gpu_slot_starts_its_next_problem_while_the_current_one_searches(tmp_path, monkeypatch):
    events, done = [], []
    fake_bench(monkeypatch, events, ["0"])
    bench.LocalBackend(per_gpu=1).run(TASKS, tmp_path, lambda t, row: done.append(t.name))
    assert events == [("launch", "a", False), ("launch", "b", True), ("finish", "a"),
                      ("launch", "c", True), ("finish", "b"), ("finish", "c")]
    assert done == ["a", "b", "c"]
    events.clear()
    bench.LocalBackend(per_gpu=1, prestart=False).run(TASKS, tmp_path, lambda t, row: None)
    assert events == [("launch", "a", False), ("finish", "a"), ("launch", "b", False), ("finish", "b"),
                      ("launch", "c", False), ("finish", "c")]


def test_on_the_cpu_interpreter_nothing_is_prestarted(tmp_path, monkeypatch):
    """Without a GPU the searches share the CPU: a prestarted process would slow the one running."""
    events = []
    fake_bench(monkeypatch, events, [])
    bench.LocalBackend(per_gpu=1).run(TASKS[:2], tmp_path, lambda t, row: None)
    assert [e for e in events if e[0] == "launch"] == [("launch", "a", False), ("launch", "b", False)]


def test_an_interrupted_bench_stops_its_prestarted_search_before_it_begins_and_leaves_it_no_row(tmp_path,
                                                                                                   monkeypatch):
    events, done = [], []
    fake_bench(monkeypatch, events, ["0"], interrupt_after="a")
    bench.LocalBackend(per_gpu=1).run(TASKS, tmp_path, lambda t, row: done.append(t.name))
    assert done == ["a"] and ("waited", "b") in events and ("finish", "b") not in events
    assert not (tmp_path / bench.GATES / "b").exists()  # never opened: a re-run starts it afresh


@pytest.mark.parametrize("gated", [False, True])
def test_a_gated_row_counts_its_wall_time_from_the_gate(tmp_path, monkeypatch, gated):
    """The row's wall time is the GPU's: from the gate's opening (a search queued behind another is not slower).
    The bench's clock is a fake that moves only between the events: launched at 100, queued until 160 (the gate
    opens), ended at 170; no wall-clock bound."""
    class Ended:
        def wait(self, timeout=None):
            return 1

    clock = [100.0]
    monkeypatch.setattr(bench, "time", types.SimpleNamespace(time=lambda: clock[0]))
    monkeypatch.setattr(bench.Searches, "start", lambda self, command, **popen: Ended())
    task = bench.BenchTask("p", "p")
    launched = bench.launch(task, tmp_path, "0", bench.Searches(), gated=gated)
    clock[0] = 160.0  # queued behind the GPU's search until now
    launched.open()
    clock[0] = 170.0  # the search ended
    row = bench.finish(task, launched, tmp_path, "0", None, bench.Searches())
    assert row.status == "failed" and row.wall_s == (10.0 if gated else 70.0)  # from the gate, or from the launch
    assert (launched.gate is not None) == gated and not (tmp_path / bench.GATES / "p").exists()


def test_no_task_waits_behind_one_slot_while_another_slot_could_take_it(tmp_path, monkeypatch):
    """Prestarting only while the queue holds a task for every slot: two GPUs and two problems run side by side,
    neither queued behind the other's search."""
    events = []
    fake_bench(monkeypatch, events, ["0", "1"])
    bench.LocalBackend(per_gpu=1).run(TASKS[:2], tmp_path, lambda t, row: None)
    assert sorted(e for e in events if e[0] == "launch") == [("launch", "a", False), ("launch", "b", False)]


@pytest.mark.parametrize("printed", [[], ["[kernelevo] problem p at n=4", "[kernelevo] baselines measured in 99.2 s"]])
def test_a_problem_past_the_benchs_limit_says_the_limit_and_where_it_was(tmp_path, monkeypatch, printed):
    """On 4 x H100, 14 rows said "timed out: " and the tail of a long line, or nothing: the row says the limit and
    the last line of progress (the stage it was past), or that it was still starting."""
    class Running:  # past any limit; once killed, it ends
        def wait(self, timeout=None):
            if timeout is not None:
                raise subprocess.TimeoutExpired("kernelevo", timeout)
            return -9

        def kill(self):
            pass

    monkeypatch.setattr(bench.Searches, "start", lambda self, command, **popen: Running())
    task = bench.BenchTask("p", "p")
    launched = bench.launch(task, tmp_path, "0", bench.Searches())
    launched.log.write_text("".join(f"{line}\n" for line in printed) + "Traceback: not progress\n")
    row = bench.finish(task, launched, tmp_path, "0", 300.0, bench.Searches())
    assert row.status == "failed" and row.reason.startswith("timed out after 300 s (bench.backend.timeout_s), ")
    assert row.reason.endswith("its last line: [kernelevo] baselines measured in 99.2 s" if printed else
                               "before its first line (the process and its evaluation service were starting)")
