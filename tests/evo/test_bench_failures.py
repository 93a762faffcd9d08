"""Issue 67: a bench read a failed run's reason out of its log (the last ``kernelevo: error:`` line). The run writes its
failure as a record (``evo.runs.failure.RunFailure``: message, exit status, kind, a bug's traceback) into a file the
bench names outside the run directory (a user's error before the first evaluation removes that directory), and the
bench's row carries it; the log is read only when the process died without writing one, and the row says so."""
import pytest

from conftest import kernelevo
from kernelevo.core.errors import KernelevoError
from evo.benchmark import bench
from evo.runs.failure import FAILURE_FILE, FailureKind, RunFailure

TINY = ("search=tiny", "search.generations=0", "fitness.trials=2", "fitness.timing.interpreter_reps=1")
MISLEADING = "kernelevo: error: a line of the log, not the run's record"


class Ended:
    def __init__(self, code):
        self.code = code

    def wait(self, timeout=None):
        return self.code


def in_process(monkeypatch, tmp_path):
    """The bench's searches run in this process (the command's `main`, as `conftest.kernelevo`), the environment the
    bench gives them included; each leaves a misleading error line at the end of its log."""
    def start(self, command, env, stdout, **popen):
        done = kernelevo(*command[3:], cwd=tmp_path, env={FAILURE_FILE: env[FAILURE_FILE]})
        stdout.write(done.stdout + done.stderr + MISLEADING + "\n")
        stdout.flush()
        return Ended(done.returncode)
    monkeypatch.setattr(bench.Searches, "start", start)


def failing_service(monkeypatch, error: Exception):
    from evo.service.evaluation import LocalEvaluators

    def service(*args, **kwargs):
        raise error
    monkeypatch.setattr(LocalEvaluators, "service", service)  # inside the run: its store made, nothing evaluated


def test_a_user_error_is_the_rows_typed_reason_though_the_run_removed_its_directory(tmp_path, monkeypatch):
    in_process(monkeypatch, tmp_path)
    failing_service(monkeypatch, KernelevoError("no evaluator for this device: set fitness.device"))
    task = bench.BenchTask("elementwise_chain", "elementwise_chain", TINY)
    row = bench.run_task(task, tmp_path, None)
    assert not (tmp_path / bench.RUNS / task.slug).exists()  # nothing evaluated: the run put its directory back
    assert row.status == "failed", row.reason
    assert row.failure.kind is FailureKind.USER and row.failure.status == 2 and row.failure.traceback == ""
    assert row.failure.message.startswith("no evaluator for this device: set fitness.device")
    assert row.reason.startswith("exit code 2: no evaluator for this device: set fitness.device")
    assert "a line of the log" not in row.reason
    bench.save_row(tmp_path, task, row)
    assert bench.saved_row(tmp_path, task).failure == row.failure  # typed again when read back


def test_a_bug_is_the_rows_typed_reason_with_its_traceback(tmp_path, monkeypatch):
    in_process(monkeypatch, tmp_path)
    failing_service(monkeypatch, ValueError("not enough values to unpack (expected 2, got 1)"))
    task = bench.BenchTask("elementwise_chain", "elementwise_chain", TINY)
    row = bench.run_task(task, tmp_path, None)
    assert (tmp_path / bench.RUNS / task.slug / "run.db").is_file()  # a bug keeps its directory
    assert row.failure.kind is FailureKind.BUG and row.failure.status == 1, row.reason
    assert row.failure.message == "ValueError: not enough values to unpack (expected 2, got 1)"
    assert "in service" in row.failure.traceback and row.failure.traceback.endswith(row.failure.message)
    assert row.reason.startswith("exit code 1: bug: ValueError: not enough values to unpack")
    assert "a line of the log" not in row.reason


def test_a_process_that_died_without_a_record_is_said_from_its_log(tmp_path, monkeypatch):
    def start(self, command, env, stdout, **popen):
        stdout.write("[kernelevo] searching\nSegmentation fault in a library\n")
        return Ended(3)
    monkeypatch.setattr(bench.Searches, "start", start)
    (tmp_path / bench.FAILURES).mkdir()
    stale = RunFailure("an earlier run's error", 2, FailureKind.USER)
    stale.write(tmp_path / bench.FAILURES / "rmsnorm.json")  # the bench removes it before the run starts
    row = bench.run_task(bench.BenchTask("rmsnorm", "rmsnorm"), tmp_path, None)
    assert row.status == "failed" and row.failure is None
    assert row.reason.startswith("exit code 3, no failure record") and "earlier" not in row.reason
    assert row.reason.endswith("its log's last lines: [kernelevo] searching | Segmentation fault in a library")


@pytest.mark.parametrize("args, kind, status", [
    (["run", "problem=no_such_problem"], FailureKind.USER, 2),  # refused before Hydra starts
    (["report", "run_dir=nowhere"], FailureKind.USER, 2),
])
def test_a_command_refused_before_it_starts_writes_its_record_where_asked(tmp_path, args, kind, status):
    path = tmp_path / "elsewhere" / "failure.json"
    done = kernelevo(*args, cwd=tmp_path, env={FAILURE_FILE: str(path)})
    failure = RunFailure.read(path)
    assert done.returncode == status and failure.kind is kind and failure.status == status
    assert f"kernelevo: error: {failure.message}" in done.stderr
