"""A run with no correct kernel says so (issue 68): its exit code (NO_CORRECT_EXIT), best_kernel.py's header, and a
bench that reads it as a finished run; its report shows each failure's reason beside its count."""
import pytest

from conftest import CANDIDATES, SCALE_SHIFT, TINY, kernelevo
from evo.benchmark import bench
from evo.reports.sizes_record import BAKED
from evo.reports.outcome import NO_CORRECT_EXIT, RunOutcome
from evo.reports.report import status_rows
from kernelevo.core.evaluation_record import EvalResult

SOURCE = "import torch\n"


def test_best_kernel_py_of_a_run_without_a_correct_kernel_opens_with_a_header_saying_so_and_why():
    flagged = RunOutcome(status="incorrect", reason="trial 1: 400 of 400 elements exceed atol\nmore").flagged(SOURCE)
    assert flagged.startswith("# kernelevo: NOT A CORRECT KERNEL: no kernel of this run passed the checks; this is "
                              "its best candidate, which failed them (incorrect: trial 1: 400 of 400 elements exceed "
                              "atol). Do not use it as a kernel.\n") and flagged.endswith(SOURCE)
    assert "more" not in flagged  # the reason's first line
    long = RunOutcome(status="timeout", reason="x" * 900).flagged(SOURCE).splitlines()[0]
    assert "(timeout: " + "x" * 288 + "...)" in long and "x" * 289 not in long  # cut at 300 characters
    for status in ("ok", BAKED):  # correct (at the test sizes only, too: its own header says that)
        assert RunOutcome(status=status).flagged(SOURCE) == SOURCE


def test_a_bench_reads_a_run_that_ended_with_no_correct_kernel_as_finished(tmp_path, monkeypatch):
    class Ended:
        def wait(self, timeout=None):
            return NO_CORRECT_EXIT

    monkeypatch.setattr(bench.Searches, "start", lambda self, command, **popen: Ended())
    task = bench.BenchTask("p", "p")
    launched = bench.launch(task, tmp_path, None, bench.Searches())
    (tmp_path / bench.RUNS / task.slug).mkdir(parents=True)
    RunOutcome(status="incorrect", reason="trial 1: wrong", stop_reason="2 generations done",
               evaluations=5).write(tmp_path / bench.RUNS / task.slug)
    row = bench.finish(task, launched, tmp_path, None, None, bench.Searches())
    assert (row.status, row.reason, row.summary.evaluations) == ("incorrect", "2 generations done", 5)


def test_the_reports_evaluations_give_each_failures_reasons_beside_its_count():
    results = [EvalResult("ok", time_s=1.0), EvalResult("ok", time_s=2.0),
               *(EvalResult("incorrect", f"trial 1 (input seed {seed}): got {value}, expected 1\nthe rest")
                 for seed, value in ((11, 0.5), (12, -0.25), (13, 3e-5))),
               EvalResult("incorrect", "coverage trial: x not read"),
               EvalResult("compile_error", "NameError: name 'tl' is not defined")]
    assert status_rows(results) == [
        ("incorrect", 4, "trial 1 (input seed 11): got 0.5, expected 1 (3); coverage trial: x not read (1)"),
        ("ok", 2, ""), ("compile_error", 1, "NameError: name 'tl' is not defined (1)")]
    many = [EvalResult("timeout", f"{kind} took too long") for kind in "abcde"]
    assert status_rows(many, reasons=2) == [("timeout", 5, "a took too long (1); b took too long (1); and 3 other "
                                                           "reason(s)")]


@pytest.mark.slow
def test_a_run_with_no_correct_kernel_ends_with_its_exit_code_its_header_and_its_reasons(tmp_path):
    done = kernelevo("run", f"problem={SCALE_SHIFT}", f"problem.seed={CANDIDATES / 'wrong_math.py'}", *TINY,
                     "hydra.run.dir=R", cwd=tmp_path)
    assert done.returncode == NO_CORRECT_EXIT, done.stdout + done.stderr
    assert "no correct kernel was found" in done.stdout
    assert done.stderr.strip().endswith(f"kernelevo: no correct kernel (incorrect): exit code {NO_CORRECT_EXIT}")
    assert (tmp_path / "R" / "best_kernel.py").read_text().startswith("# kernelevo: NOT A CORRECT KERNEL: ")
    assert RunOutcome.read(tmp_path / "R").status == "incorrect"
    report = (tmp_path / "R" / "report.md").read_text()
    assert "| incorrect | " in report and "elements exceed atol=" in report  # the reason beside the count
