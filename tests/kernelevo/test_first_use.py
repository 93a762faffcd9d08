"""What a new user hit on a 2-core CPU (issue 44, points 4, 5, 7, 8): the problem's reference checked before any
candidate, one clear line per mistake, honest time accounting, and CPU benches whose tables and pages say what a
CPU run has (correct at the test sizes, evaluations, curves over evaluations) instead of empty plots."""
import json
import re
import time
from pathlib import Path

import pytest

from conftest import CANDIDATES, SCALE_SHIFT, candidate, kernelevo, make_evaluator
from kernelevo.core.errors import KernelevoError
from evo.evolution import stopping
from evo.reports.anytime import interpreter_curve
from evo.benchmark.bench import Row
from evo.benchmark.selection import select
from evo.benchmark.bench_report import HEADER, row_line, write_bench_report
from evo.reports.console import print_generation, time_text
from evo.reports.sizes_record import BAKED
from kernelevo.core.resources import process_started
from evo.reports.outcome import RunOutcome
from evo.runs.run import start_up
from evo.records.store import RunStore
from evo.evolution.search import GenerationReport
from evo.settings import Budget
from fitness.problems.problem import ProblemError, check_reference, load_problem, resolve_problem
from kernelevo.core.evaluation_record import EvalResult
from fitness.measure import verdict_text

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        {forward}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return []
"""


def problem_file(folder: Path, forward="return x * 2", inputs="[torch.randn(4, 8)]") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "problem.py"
    path.write_text(PROBLEM.format(forward=forward, inputs=inputs))
    return path


def refused(done) -> str:
    code, out, err = done
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, done
    return err


# 5. the reference checked before any candidate ---------------------------------------------------------------------
@pytest.mark.parametrize("forward, inputs, message", [
    ("raise RuntimeError('broken reference')", "[torch.randn(4, 8)]",
     "the reference Model.forward failed on get_inputs(): RuntimeError: broken reference"),
    ("return x * 2", "[torch.randn(4, 8), torch.randn(4, 8)]",
     "get_inputs() returns 2 argument(s) but Model.forward does not take them"),
    ("return x * 2", "[[torch.randn(4, 8)]]", "get_inputs() must return tensors or plain numbers (Model.forward's "
                                              "arguments), but item 1 is a list"),
    ("return x * 2", "torch.randn(4, 8)", "get_inputs() returned a Tensor; it must return a list"),
    ("return 'no tensor'", "[torch.randn(4, 8)]", "the reference Model.forward returned str"),
])
def test_a_broken_reference_is_named_with_its_file_before_any_candidate(tmp_path, forward, inputs, message):
    path = problem_file(tmp_path / "p", forward, inputs)
    with pytest.raises(ProblemError) as err:
        check_reference(load_problem(resolve_problem(str(path))), run_forward=True)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_on_a_gpu_the_reference_check_makes_no_tensor_and_runs_no_forward(tmp_path):
    """Without `run_forward` (a GPU at full sizes) the inputs are meta tensors: the count and types are checked,
    a forward that would fail is left to the worker (which names the problem file, not the candidate)."""
    check_reference(load_problem(resolve_problem(problem_file(tmp_path / "ok", "raise RuntimeError('x')")
                                                 .as_posix())), run_forward=False)
    wrong = problem_file(tmp_path / "two", inputs="[torch.randn(4, 8), torch.randn(4, 8)]")
    with pytest.raises(ProblemError, match="returns 2 argument"):
        check_reference(load_problem(resolve_problem(str(wrong))), run_forward=False)


def test_a_reference_failing_in_the_worker_is_the_problems_fault_not_the_candidates(tmp_path, sandbox):
    """On a GPU the reference's forward is not run before the search (full sizes): where it fails in the worker,
    the verdict names the problem file and says the evaluation failed outside the candidate."""
    path = problem_file(tmp_path / "p", forward="raise RuntimeError('broken reference')")
    path.write_text(path.read_text().replace("    def forward", "    def __init__(self, scale):\n        super()"
                                             ".__init__()\n\n    def forward").replace("return []", "return [2.0]"))
    with make_evaluator(problem=str(path), sandbox=sandbox) as ev:
        result = ev.evaluate(candidate("good"))
    assert result.status == "runtime_error" and result.reason.startswith("evaluation failed outside the candidate")
    assert f"{path}: the reference Model.forward failed: RuntimeError: broken reference" in result.reason


@pytest.mark.parametrize("command", ["evaluate", "run"])
def test_a_command_on_a_broken_reference_fails_at_once_naming_the_problem_not_the_candidate(cli, tmp_path, command):
    path = problem_file(tmp_path / "p", forward="raise RuntimeError('broken reference')")
    err = refused(cli(command, f"problem={path}", *([f"candidate={CANDIDATES / 'good.py'}"]
                                                    if command == "evaluate" else [])))
    assert str(path) in err and "the reference Model.forward failed" in err
    assert "seed" not in err and "LLM" not in err and "candidate" not in err.split("failed")[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # nothing written


# 7. messages -------------------------------------------------------------------------------------------------------
def test_a_directory_or_a_binary_as_candidate_is_named_as_such(cli, tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    err = refused(cli("evaluate", f"problem={SCALE_SHIFT}", f"candidate={folder}"))
    assert f"candidate={folder} is a directory" in err and "not found" not in err
    binary = tmp_path / "kernel.py"
    binary.write_bytes(b"import torch\n\x92\x00\x01")
    err = refused(cli("evaluate", f"problem={SCALE_SHIFT}", f"candidate={binary}"))
    assert str(binary) in err and "is not UTF-8 text (byte 0x92 at offset 13)" in err


def test_a_wrong_shape_says_so_and_trials_count_from_one(sandbox):
    wrong = candidate("good").replace("        return y\n", "        return y[:-1]\n")
    with make_evaluator(sandbox=sandbox) as ev:
        result = ev.evaluate(wrong)
    assert result.status == "incorrect" and result.trials_passed == 0
    assert result.reason.startswith("trial 1 (input seed") and "has shape (3, 100), expected (4, 100)" in result.reason
    summary = verdict_text.summary(result)
    assert result.max_abs_err is None and "max abs err" not in summary
    assert "correctness: 0/3 trials passed; no error measured: the output could not be compared" in summary


def test_one_generation_is_singular():
    budget = Budget(generations=1, patience=1)
    assert [s.reason for s in stopping.ended(budget, 2, 1, 1)] == ["1 generation done", "no improvement for 1 "
                                                                                         "generation"]
    assert [s.reason for s in stopping.ended(Budget(generations=0), 1, 0, 0)] == ["0 generations done"]


def test_a_sweeps_progress_lines_name_the_search_seed(capsys):
    report = GenerationReport(0, 2, 0.01, 0.01, 1, 1, 3.5, True)
    print_generation(report, interpreter=True, tag="seed 1")
    print_generation(report, interpreter=True)
    first, alone = capsys.readouterr().out.splitlines()
    assert first.startswith("[kernelevo seed 1] gen   0 |") and alone.startswith("[kernelevo] gen   0 |")


def test_one_bench_problem_by_name_is_a_list_of_one():
    assert [t.name for t in select(None, None, "row_softmax")] == ["row_softmax"]
    with pytest.raises(KernelevoError,
                       match="bench.problems=nope: not a problem .*neither a list nor an existing list"):
        select(None, None, "nope")


def test_help_says_what_the_command_does_and_a_command_leaves_no_empty_log(tmp_path):
    shown = kernelevo("run", "--help", cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("kernelevo run: evolve a faster Triton kernel")
    assert "powered by Hydra" not in shown.stdout and "docs/configuration.md" in shown.stdout
    done = kernelevo("evaluate", f"problem={SCALE_SHIFT}", f"candidate={CANDIDATES / 'good.py'}",
                     "fitness.trials=1", "hydra.run.dir=out", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out" / "result.json").is_file() and not (tmp_path / "out" / "commands.log").exists()
    assert done.stdout.startswith("[kernelevo] problem scale_shift")  # its start line, logged (kernelevo.core.log)


# 8. time accounting ------------------------------------------------------------------------------------------------
def test_the_time_line_says_generation_zero_and_the_seeds_making_apart():
    cpu = RunOutcome(status="ok", timer="interpreter", search_wall_s=200.0, generation0_s=168.6, seed_wall_s=0.3,
                     evaluations=10)
    said = time_text(cpu)
    assert said.startswith("search 200.0 s, of which generation 0 (the seeds judged and tuned) 168.6 s")
    assert said.endswith("before it: making the seeds 0.3 s, no baselines (CPU interpreter)")
    gpu = RunOutcome(status="ok", timer="cuda-events", search_wall_s=50.0, baseline_wall_s=12.0)
    assert "measuring the baselines 12.0 s" in time_text(gpu) and "generation 0" not in time_text(gpu)


def test_the_time_before_the_search_is_split_by_stage_from_the_process_s_start(tmp_path):
    """Issue 45: a bench problem's wall time beyond its search budget, split by stage so it can be cut: the
    interpreter and config, the evaluation service, the baselines and seeds (as the store has them), the rest."""
    started = process_started()
    booted = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    assert started is not None and booted <= started <= time.time()  # a process's start: after the boot, before now
    store = RunStore(tmp_path)
    store.set_meta("baseline_wall_s", 1.5)
    store.set_meta("seed_wall_s", 0.25)
    stages = start_up({"process": 100.0, "queued": 0.0, "run": 104.0, "service": 107.0, "search": 110.0}, store)
    assert stages == {"process": 4.0, "service": 3.0, "baselines": 1.5, "seeds": 0.25, "other": 1.25}
    assert start_up({"process": None, "queued": 0.0, "run": 4.0, "service": 7.0, "search": 10.0},
                    store)["process"] is None
    said = time_text(RunOutcome(status="ok", timer="cuda-events", search_wall_s=15.0, start_up_s=stages))
    assert said.endswith("from the process's start to the search's 10.0 s (process 4.0, service 3.0, baselines 1.5, "
                         "seeds 0.2, other 1.2)")
    # a bench's prestarted search: its wait at the gate is apart, not in the process's start-up
    queued = start_up({"process": 100.0, "queued": 20.0, "run": 124.0, "service": 127.0, "search": 130.0}, store)
    assert queued["process"] == 4.0 and queued["queued"] == 20.0
    said = time_text(RunOutcome(status="ok", timer="cuda-events", search_wall_s=15.0, start_up_s=queued))
    assert "search's 10.0 s (" in said and said.endswith("; queued behind the GPU's previous search 20.0 s before that)")


# 4. CPU benches: correct at the test sizes apart from incorrect; no empty plot; tables that fit ---------------------
def cpu_row(name, status, curve, evaluations, seed=None) -> Row:
    summary = RunOutcome(status=status, timer="interpreter", best_s=0.05 if status in ("ok", BAKED) else None,
                         evaluations=evaluations,
                         interpreter_curve=curve, stop_reason="1 generation done")
    return Row(name, status, "" if status in ("ok", BAKED) else "no correct kernel", 30.0, summary=summary,
               search_seed=seed)


def test_the_interpreter_curve_counts_correct_kernels_and_the_best_time_over_evaluations():
    def judged(status, time_s=None, timer="interpreter"):
        return 0.0, EvalResult(status=status, timer=timer, time_s=time_s)

    history = [judged("compile_error"), judged("ok", 0.2), judged("incorrect"), judged("ok", 0.1),
               judged("ok", 0.3), judged("incorrect")]
    assert interpreter_curve(history) == [
        {"evaluations": 1, "correct": 0, "best_s": None}, {"evaluations": 2, "correct": 1, "best_s": 0.2},
        {"evaluations": 4, "correct": 2, "best_s": 0.1}, {"evaluations": 5, "correct": 3, "best_s": 0.1},
        {"evaluations": 6, "correct": 3, "best_s": 0.1}]
    assert interpreter_curve([judged("ok", 1e-5, "cuda-events")]) == []  # a GPU run has its speed-up curves


def test_a_cpu_bench_counts_baked_kernels_as_correct_at_the_test_sizes_and_draws_what_it_has(tmp_path):
    curve = [{"evaluations": 1, "correct": 1, "best_s": 0.08}, {"evaluations": 6, "correct": 4, "best_s": 0.05}]
    rows = [cpu_row("level1/23_Softmax.py", BAKED, curve, 6, 0), cpu_row("level1/23_Softmax.py", BAKED, curve, 6, 1),
            cpu_row("row_softmax", "ok", curve, 6), cpu_row("broken", "incorrect",
                                                            [{"evaluations": 4, "correct": 0, "best_s": None}], 4),
            Row("crashed", "failed", "the run failed")]
    summary = write_bench_report(tmp_path, rows, "cpu bench", {})
    assert (summary["correct"], summary["baked"], summary["device"]) == (3, 2, "CPU")
    assert row_line(rows[0]) == "[bench] level1/23_Softmax.py seed 0: correct at test sizes only (baked) (30 s)"
    assert row_line(rows[3]) == "[bench] broken: incorrect (30 s) no correct kernel"
    table = (tmp_path / "bench.md").read_text()
    assert "- correct: 3 of 5 runs (4 problems x up to 2 search seeds) (60%); 2 of them correct at the test sizes "\
           "only (baked there" in table
    header = next(line for line in table.splitlines() if line.startswith("| problem |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert set(columns) < set(HEADER) and not {"eager", "vs eager", "SoL", "GPU busy", "LLM calls"} & set(columns)
    assert "| level1/23_Softmax.py seed 0 | correct at test sizes only (baked) |" in table
    assert json.loads((tmp_path / "bench.json").read_text())["rows"][0]["status"] == BAKED  # the key stays
    page = (tmp_path / "bench.html").read_text()
    assert "No speed-up to draw" not in page and "no correct kernel" not in page.split("<details>")[0].lower()
    assert "<h2>Correct kernels and best time so far</h2>" in page
    plots = re.findall(r"<img alt='([^']*)' src='data:image/png;base64,", page)
    assert plots == ["evaluations and outcomes of the runs", "level1/23_Softmax.py: correct kernels and best time so "
                     "far", "row_softmax: correct kernels and best time so far", "broken: correct kernels and best "
                     "time so far"]
    main = page[page.index("<table>"):page.index("</table>")]
    assert main.count("<th>") == 6  # problem, status, best, seed (tuned), evaluations, wall (s): the rest folded
    assert "<details><summary>every column" in page and "<div class='wide'>" in page


def test_a_gpu_bench_page_keeps_its_speed_ups_in_view_and_folds_the_rest(tmp_path):
    gpu = RunOutcome(status="ok", timer="cuda-events", best_s=1e-5, speedup_vs_eager=2.0, evaluations=10,
                     anytime={"columns": [], "points": []})
    write_bench_report(tmp_path, [Row("p", "ok", summary=gpu, gpu="H100")], "gpu bench", {})
    page = (tmp_path / "bench.html").read_text()
    main = page[page.index("<table>"):page.index("</table>")]
    assert "<th>vs eager</th>" in main and "<th>eager</th>" not in main and "<th>note</th>" not in main
    assert "<th>note</th>" in page.split("<details>")[1] and "<h2>Best speed-up so far</h2>" in page
