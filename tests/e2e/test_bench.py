"""`kernelevo bench`: one run per problem, spread over the devices, one table; a re-run skips what finished and
resumes what started; a killed bench takes its searches with it; a bad selection is a clear error before anything
runs."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import alive, command_of, kernelevo, processes_under, read_store

TINY = ["search=tiny", "search.generations=0", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]


def bench(*args, cwd, process=False):
    return kernelevo("bench", *args, cwd=cwd, timeout=900, process=process)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("bench")
    done = bench("bench.problems=[row_softmax,rmsnorm]", "bench.backend.per_gpu=2", f"bench.dir={cwd / 'b'}",
                 "bench.title=two problems", *TINY, cwd=cwd)
    return cwd, cwd / "b", done


@pytest.mark.slow
def test_a_bench_runs_each_problem_in_its_own_run_and_writes_one_table(finished):
    _, bench_dir, done = finished
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((bench_dir / "bench.json").read_text())
    assert [r["name"] for r in report["rows"]] == ["row_softmax", "rmsnorm"]
    assert report["summary"]["correct"] == 2 and report["summary"]["correct_rate"] == 1.0
    assert report["overrides"] == TINY  # every run got the bench's run settings, and only those
    for row in report["rows"]:
        run = json.loads((bench_dir / "runs" / row["name"] / "summary.json").read_text())
        assert row["status"] == "ok" and row["summary"] == run and run["seed"] == "seed"
        assert run["problem"] == row["name"] and run["evaluations"] >= 2 and run["timer"] == "interpreter"
    table = (bench_dir / "bench.md").read_text()
    assert table.startswith("# two problems") and "(interpreter)" in table
    assert "| [row_softmax](runs/row_softmax/report.html) | ok | seed |" in table
    assert "correct: 2 of 2" in done.stdout and "data:image/png;base64," in (bench_dir / "bench.html").read_text()
    assert f"each problem's log in {bench_dir / 'logs'}" in done.stdout  # said before any problem runs
    for name in ("row_softmax", "rmsnorm"):  # each problem's start, with its log, before its row
        said = f"[bench] {name}: started on the CPU interpreter; its log: {bench_dir / 'logs' / name}.log"
        assert done.stdout.index(said) < done.stdout.index(f"[bench] {name}: ok")
    assert not (bench_dir.parent / "outputs").exists()  # Hydra wrote into bench.dir, no outputs/.../.hydra beside
    page = (bench_dir / "bench.html").read_text()
    for name in ("row_softmax", "rmsnorm"):  # each problem's row links its run's own report, and so does the table
        report = bench_dir / "runs" / name / "report.html"
        assert report.is_file() and f"<a href='runs/{name}/report.html'>{name}</a>" in page
        assert f"[{name}](runs/{name}/report.html)" in table
        assert any(line.startswith(f"{name} ") and line.endswith(str(report)) for line in done.stdout.splitlines())


@pytest.mark.slow
def test_a_rerun_skips_finished_problems_and_resumes_a_started_one(finished):
    cwd, bench_dir, _ = finished
    (bench_dir / "rows" / "rmsnorm.json").unlink()  # as if killed after rmsnorm's run began, before its row
    logs = {name: (bench_dir / "logs" / f"{name}.log").read_text() for name in ("row_softmax", "rmsnorm")}
    before = json.loads((bench_dir / "runs" / "rmsnorm" / "summary.json").read_text())
    again = bench("bench.problems=[row_softmax,rmsnorm]", f"bench.dir={bench_dir}", *TINY, cwd=cwd)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 problems, 1 finished before" in again.stdout
    assert f"[bench] rmsnorm: resumed on the CPU interpreter; its log: {bench_dir / 'logs' / 'rmsnorm.log'}" \
        in again.stdout and "[bench] row_softmax: started" not in again.stdout
    assert (bench_dir / "logs" / "row_softmax.log").read_text() == logs["row_softmax"]  # not run again
    resumed = (bench_dir / "logs" / "rmsnorm.log").read_text()[len(logs["rmsnorm"]):]
    assert resumed and "0 generations done" in resumed
    after = json.loads((bench_dir / "runs" / "rmsnorm" / "summary.json").read_text())
    assert after["evaluations"] == before["evaluations"]  # resumed from its store: nothing evaluated twice
    assert json.loads((bench_dir / "bench.json").read_text())["summary"]["correct"] == 2


@pytest.mark.slow
def test_the_ray_backend_gives_the_same_table_as_the_local_one(finished, tmp_path):
    pytest.importorskip("ray")
    _, local_dir, _ = finished
    # a local Ray of its own (address=auto would join any cluster on the host, another test's included; what auto
    # does: test_evaluation_ray.py::test_address_auto_joins_the_hosts_cluster_or_starts_a_local_ray)
    done = bench("bench.problems=[row_softmax,rmsnorm]", "bench/backend=ray", "bench.backend.num_gpus=0",
                 "bench.backend.address=null", "bench.backend.local_cpus=2", f"bench.dir={tmp_path / 'r'}", *TINY,
                 cwd=tmp_path, process=True)  # Ray's driver in a process of its own, as a user runs it
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ray: local" in done.stdout

    def table(folder):
        rows = json.loads((folder / "bench.json").read_text())["rows"]
        # evaluations and times follow the interpreter's wall-clock measurements, which differ run to run
        return [(r["name"], r["status"], r["summary"]["seed"], r["summary"]["problem"], r["summary"]["policy"],
                 r["summary"]["timer"]) for r in rows]

    assert table(tmp_path / "r") == table(local_dir)
    # where each ran: no GPU here (num_gpus=0), so no GPU named, as the local backend's rows on the CPU
    assert [r["gpu"] for r in json.loads((tmp_path / "r" / "bench.json").read_text())["rows"]] == ["", ""]
    for name in ("row_softmax", "rmsnorm"):  # every run came back to the driver's bench directory
        assert (tmp_path / "r" / "runs" / name / "run.db").is_file()
        assert (tmp_path / "r" / "logs" / f"{name}.log").is_file()


def test_a_ray_row_names_the_node_and_the_gpus_ray_gave_its_task():
    """Row.gpu on a Ray cluster: which node and GPU ran the problem (issue 29's 2-GPU rows named none)."""
    from evo.service.ray_cluster import placement

    assert placement("10.0.0.2", [1]) == "Ray node 10.0.0.2 GPU 1"
    assert placement("10.0.0.3", [0, 1]) == "Ray node 10.0.0.3 GPU 0,1"
    assert placement("10.0.0.2", []) == "Ray node 10.0.0.2"  # an actor on the CPU interpreter says its node


def pending_interrupt(pid: int) -> bool:
    """Whether a SIGINT waits for process `pid` (its own or its thread group's pending signals, /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # it has ended: nothing to wait for
    masks = [int(line.split()[1], 16) for line in status.splitlines() if line.startswith(("SigPnd:", "ShdPnd:"))]
    return any(mask & 1 << (signal.SIGINT - 1) for mask in masks)


def row_softmax_finished(finished, bench_dir):
    """A copy of the module's bench in `bench_dir` with only row_softmax finished (rmsnorm's row, run and log
    removed): a bench of the same settings starts at rmsnorm, as if row_softmax had just finished (one whole run
    less per test that needs a bench interrupted in its second problem)."""
    shutil.copytree(finished[1], bench_dir)
    (bench_dir / "rows" / "rmsnorm.json").unlink()
    (bench_dir / "logs" / "rmsnorm.log").unlink()
    shutil.rmtree(bench_dir / "runs" / "rmsnorm")


@pytest.mark.slow
def test_a_killed_bench_takes_its_searches_with_it_and_a_rerun_repeats_nothing_finished(finished, tmp_path):
    bench_dir = tmp_path / "b"
    row_softmax_finished(finished, bench_dir)
    args = ["bench.problems=[row_softmax,rmsnorm]", f"bench.dir={bench_dir}", *TINY]
    proc = subprocess.Popen([sys.executable, "-m", "kernelevo.cli", "bench", *args], cwd=tmp_path,
                            env={**os.environ, "TRITON_INTERPRET": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    seen, deadline = {}, time.time() + 300
    try:
        while proc.poll() is None and time.time() < deadline:  # until the second search's workers run
            seen = processes_under(proc.pid)
            zygotes = {pid for pid in seen if "fitness.workers.zygote" in command_of(pid)}
            if (bench_dir / "rows" / "row_softmax.json").is_file() and any(p in zygotes for p, _ in seen.values()):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the bench ended before its second search's workers ran"
        assert any("problem=rmsnorm" in command_of(pid) for pid in seen) and len(seen) >= 3  # run, zygote, worker
        os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the bench alone: it runs no handler, signals no one
        proc.wait()
        end = time.time() + 5
        while any(alive(pid, start) for pid, (_, start) in seen.items()) and time.time() < end:
            time.sleep(0.05)
        assert not [command_of(pid) for pid, (_, start) in seen.items() if alive(pid, start)]
    finally:  # a failure leaves nothing of this test running
        for pid, (_, start) in seen.items():
            if alive(pid, start):
                os.kill(pid, signal.SIGKILL)
    run_dir = bench_dir / "runs" / "rmsnorm"
    done_before = set(read_store(run_dir, lambda store: store.evaluations()))
    log = (bench_dir / "logs" / "row_softmax.log").read_text()
    again = bench(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 problems, 1 finished before" in again.stdout
    assert (bench_dir / "logs" / "row_softmax.log").read_text() == log  # the finished problem was not run again
    calls, distinct = read_store(run_dir, lambda s: (s.evaluation_count(), s.distinct_evaluation_count()))
    assert calls == distinct and done_before <= set(read_store(run_dir, lambda store: store.evaluations()))
    report = json.loads((bench_dir / "bench.json").read_text())
    assert [(r["name"], r["status"]) for r in report["rows"]] == [("row_softmax", "ok"), ("rmsnorm", "ok")]


@pytest.mark.parametrize("args, message", [
    (["bench.problems=[row_softmax,no_such_problem]"], "'no_such_problem' is not a bundled problem"),
    (["bench.problems=/nonexistent/list.txt"], "neither a list nor an existing list file"),
    (["bench.level=1"], "set bench.problems (a list or a list file) or bench.root with bench.level"),
    (["bench.root=/nonexistent", "bench.level=1"], "bench.root=/nonexistent is not a folder"),
])
def test_a_bad_selection_is_a_clear_error_before_anything_runs(cli, tmp_path, args, message):
    code, _, err = cli("bench", *args)
    assert code == 2 and message in err, err
    assert not list(tmp_path.rglob("run.db"))


def test_problems_are_selected_by_path_id_level_or_list_file(tmp_path):
    from evo.benchmark.bench import BenchError
    from evo.benchmark.selection import select

    for name in ("100_Big.py", "23_Softmax.py", "1_Matmul.py"):
        (tmp_path / "level1").mkdir(exist_ok=True)
        (tmp_path / "level1" / name).write_text("# a problem\n")
    by_level = select(str(tmp_path), 1, None)
    assert [t.name for t in by_level] == ["level1/1_Matmul.py", "level1/23_Softmax.py", "level1/100_Big.py"]
    listing = tmp_path / "list.txt"
    listing.write_text("level1/23_Softmax.py\n# a comment\nlevel1/100\n")
    chosen = select(str(tmp_path), None, str(listing), overrides=("search=tiny",))
    assert [t.name for t in chosen] == ["level1/23_Softmax.py", "level1/100_Big.py"]
    assert chosen[0].problem == str((tmp_path / "level1" / "23_Softmax.py").resolve())
    assert chosen[0].overrides == ("search=tiny",) and chosen[0].slug == "level1__23_Softmax"
    assert [t.name for t in select(str(tmp_path), 1, ["1", "row_softmax"])] == ["level1/1_Matmul.py", "row_softmax"]
    with pytest.raises(BenchError, match="listed twice"):
        select(str(tmp_path), 1, ["1", "level1/1_Matmul.py"])
    with pytest.raises(BenchError, match="'level1/7' not found"):
        select(str(tmp_path), None, ["level1/7"])


def test_a_missing_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed (in this process)
    done = bench("bench.problems=[row_softmax]", "bench/backend=ray", f"bench.dir={tmp_path / 'b'}", cwd=tmp_path)
    assert done.returncode == 2 and "pip install 'kernelevo[ray]'" in done.stderr, done.stdout + done.stderr


def test_an_interrupted_search_is_no_finished_row_and_a_rerun_resumes_it(tmp_path, monkeypatch):
    """A search that ended by Ctrl-C (exit 130) or a signal is not a failed problem: no row is saved for it."""
    from evo.benchmark import bench, bench_interrupt

    class Ended:  # the search's process, ended with `code`
        def __init__(self, code):
            self.code = code

        def wait(self, timeout=None):
            return self.code

    task = bench.BenchTask("rmsnorm", "rmsnorm")
    for code in (130, -9):
        monkeypatch.setattr(bench_interrupt.subprocess, "Popen", lambda *a, code=code, **k: Ended(code))
        row = bench.run_task(task, tmp_path, None)
        assert row.status == bench.INTERRUPTED and str(code) in row.reason

    class Backend:
        def describe(self):
            return "fake"

        def run(self, tasks, bench_dir, done):
            for t in tasks:
                done(t, bench.run_task(t, bench_dir, None))

    rows = bench.execute_bench([task], Backend(), tmp_path)
    assert rows[0].status == bench.INTERRUPTED and bench.saved_row(tmp_path, task) is None


@pytest.mark.slow
def test_ctrl_c_ends_the_bench_with_a_row_for_the_interrupted_problem_and_a_rerun_continues_it(finished, tmp_path):
    """Issue 44 point 2: Ctrl-C stopped only the current problem; the bench went on through the next ones, and the
    interrupted problem got no row. Now the bench ends: its finished problem keeps its row, the interrupted one gets
    a row saying it is resumable (its run keeps its checkpoint), the one not begun says so, and one line says how
    to continue; the same command continues it, repeating nothing."""
    from evo.records.store import RunStore
    from conftest import interruptible

    bench_dir = tmp_path / "b"
    row_softmax_finished(finished, bench_dir)
    args = ["bench.problems=[row_softmax,rmsnorm,layernorm]", f"bench.dir={bench_dir}", *TINY]
    proc = subprocess.Popen([sys.executable, "-m", "kernelevo.cli", "bench", *args], cwd=tmp_path,
                            env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=interruptible)
    seen, deadline = {}, time.time() + 300
    try:
        while proc.poll() is None and time.time() < deadline:  # until rmsnorm's search has begun its run
            seen = processes_under(proc.pid)
            if (bench_dir / "rows" / "row_softmax.json").is_file() and RunStore.saved_run(bench_dir / "runs" /
                                                                                          "rmsnorm"):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the bench ended before rmsnorm's search began"
        # rmsnorm's run held still until the Ctrl-C reaches it: on a loaded machine its few seconds of search could
        # end before the bench passed the signal on (the race this test is not about)
        ours = {pid for pid in seen if "problem=rmsnorm" in command_of(pid)}  # the run, and workers forked from it
        search = next(pid for pid in ours if seen[pid][0] not in ours)
        os.kill(search, signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: its whole process group
        held = time.time() + 30
        while proc.poll() is None and not pending_interrupt(search) and time.time() < held:
            time.sleep(0.05)
        os.kill(search, signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
        seen.update(processes_under(proc.pid))
    finally:  # a failure leaves nothing of this test running
        proc.kill()
        for pid, (_, start) in seen.items():
            if alive(pid, start):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert err.strip().splitlines()[-1] == (
        f"kernelevo: interrupted; {bench_dir} keeps 1 of 3 problems finished (interrupted, resumable: rmsnorm): "
        f"continue with the same command and bench.dir={bench_dir}"), err
    assert "Traceback" not in out + err and "layernorm" not in " ".join(command_of(p) for p in seen)
    assert not (bench_dir / "runs" / "layernorm").exists()  # no problem began after the Ctrl-C
    report = json.loads((bench_dir / "bench.json").read_text())
    assert [(r["name"], r["status"]) for r in report["rows"]] == [
        ("row_softmax", "ok"), ("rmsnorm", "interrupted"), ("layernorm", "not started")]
    assert "resumable" in report["rows"][1]["reason"]
    assert "| rmsnorm | interrupted |" in (bench_dir / "bench.md").read_text()
    assert not (bench_dir / "rows" / "rmsnorm.json").exists()  # not finished: a re-run resumes it
    assert not list(bench_dir.rglob(".kernelevo.lock"))  # the bench and its search gave their directories back
    again = bench(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 problems, 1 finished before" in again.stdout
    assert "resuming" in (bench_dir / "logs" / "rmsnorm.log").read_text()
    report = json.loads((bench_dir / "bench.json").read_text())
    assert [(r["name"], r["status"]) for r in report["rows"]] == [(n, "ok") for n in ("row_softmax", "rmsnorm",
                                                                                       "layernorm")]
    calls, distinct = read_store(bench_dir / "runs" / "rmsnorm", lambda s: (s.evaluation_count(),
                                                                           s.distinct_evaluation_count()))
    assert calls == distinct  # nothing evaluated twice across the interrupt


@pytest.mark.slow
def test_a_rerun_with_other_settings_is_refused_naming_them_or_runs_again_when_asked(finished, cli, tmp_path):
    """Issue 44 point 3: `bench.dir=B fitness/policy=strict-fp32` after a `triton` bench kept the triton runs as
    finished and overwrote the 3-row table with 1 row. Each stored run's settings are compared with the command's."""
    bench_dir = tmp_path / "b"
    shutil.copytree(finished[1], bench_dir)  # the module's bench stays as it is for the other tests
    table = (bench_dir / "bench.md").read_text()
    both = ["bench.problems=[row_softmax,rmsnorm]", f"bench.dir={bench_dir}", *TINY]
    code, out, err = cli("bench", *both, "fitness/policy=strict-fp32")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"bench.dir={bench_dir} holds 2 runs made with other settings than this command's: rmsnorm " \
           "(fitness.policy.name: triton -> strict-fp32; " in err
    assert "start a fresh bench in another bench.dir" in err and "bench.rerun=changed" in err
    assert (bench_dir / "bench.md").read_text() == table and not (bench_dir / "replaced").exists()
    code, _, err = cli("bench", *both, "bench.rerun=everything")
    assert code == 2 and "bench.rerun=everything: use bench.rerun=changed" in err

    fewer = bench("bench.problems=[rmsnorm]", f"bench.dir={bench_dir}", *TINY, cwd=tmp_path)  # same settings
    assert fewer.returncode == 0, fewer.stdout + fewer.stderr
    assert "1 problems, 1 finished before" in fewer.stdout and "keeps 1 more problem" in fewer.stdout
    rows = json.loads((bench_dir / "bench.json").read_text())["rows"]
    assert [(r["name"], r["status"]) for r in rows] == [("rmsnorm", "ok"), ("row_softmax", "ok")]  # none dropped

    again = bench("bench.problems=[rmsnorm]", f"bench.dir={bench_dir}", *TINY, "fitness/policy=strict-fp32",
                  "bench.rerun=changed", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    replaced = next((bench_dir / "replaced").iterdir())
    assert f"the runs made with other settings are kept under {replaced}" in again.stdout
    for name in ("rmsnorm", "row_softmax"):  # both triton runs kept, with their rows and logs
        assert (replaced / "runs" / name / "run.db").is_file() and (replaced / "rows" / f"{name}.json").is_file()
    rows = json.loads((bench_dir / "bench.json").read_text())["rows"]
    assert [(r["name"], r["status"], r["summary"]["policy"]) for r in rows] == [("rmsnorm", "ok", "strict-fp32")]
