"""What a bench says while a problem runs (issue 68: a KernelBench problem ran 218 s on the CPU with the bench silent,
and the bench never named its logs/ folder): each problem's start with its log file, then its stage as its log tells
it, each change once."""
from pathlib import Path

from evo.benchmark.bench_progress import StageWatch, start_line


def test_a_problems_start_names_where_it_runs_and_its_log():
    log = Path("b/logs/level1__23_Softmax.log")
    assert start_line("level1/23_Softmax.py", None, False, log) == \
        "[bench] level1/23_Softmax.py: started on the CPU interpreter; its log: b/logs/level1__23_Softmax.log"
    assert start_line("rmsnorm seed 2", "1", True, log).startswith("[bench] rmsnorm seed 2: resumed on GPU 1; its log")


def test_the_stage_is_the_last_progress_line_of_its_own_run_each_change_said_once(tmp_path):
    log = tmp_path / "p.log"
    log.write_text("[kernelevo] gen   3 | an earlier run's line\n")
    watch = StageWatch("level1/23_Softmax.py", log, offset=log.stat().st_size)
    assert watch.poll() is None  # the earlier run's lines are not this one's stage
    with open(log, "a") as f:
        f.write("[kernelevo] problem level1/23_Softmax.py at batch_size=4\nTriton's noise\n")
    assert watch.poll() == "[bench] level1/23_Softmax.py: problem level1/23_Softmax.py at batch_size=4"
    assert watch.poll() is None  # unchanged: nothing said again
    with open(log, "a") as f:
        f.write("[kernelevo] generation 0: seed 1 of 2 (inductor) tuned over 2 trial(s): ok, 3.000 ms\n"
                "[kernelevo seed 1] gen   0 | evaluations    4\n")
    assert watch.poll() == "[bench] level1/23_Softmax.py: gen   0 | evaluations    4"
    assert StageWatch("x", tmp_path / "missing.log").poll() is None  # no log yet: nothing to say


def test_a_long_log_is_read_at_its_end(tmp_path):
    log = tmp_path / "p.log"
    log.write_text("[kernelevo] gen   1 | old\n" + "Triton's noise\n" * 10_000 + "[kernelevo] gen  40 | now\n")
    assert StageWatch("p", log).poll() == "[bench] p: gen  40 | now"
