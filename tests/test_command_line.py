"""The command line as a new user meets it: overrides checked against the config (typos named, with or without `+`),
one-line errors naming the fix for the command in use, nothing written by a command that fails its checks, the
sizes a problem file runs at on the interpreter, and `kernelevo list`."""
import json
import os
import subprocess
import sys

import pytest

from conftest import CANDIDATES, PROBLEMS


def kernelevo(*args, cwd):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, "-m", "kernelevo.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def one_line_error(proc) -> str:
    """The error a failed command printed: one line, no traceback."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "search.generatons=3"], "unknown key 'search.generatons' for `kernelevo run`; did you mean "
                                     "search.generations?"),
    (["run", "+search.generatons=3"], "did you mean search.generations?"),  # the `+` Hydra suggests changes nothing
    (["evaluate", "fitness.trails=2"], "did you mean fitness.trials?"),
    (["run", "llm.model=openai/gpt-4o"], "unknown key 'llm.model' for `kernelevo run`: it exists with "
                                         "llm=anthropic|local|openai"),
    (["run", "search=tinny"], "search=tinny: no such option of the group search; did you mean tiny?"),
    (["run", "fitness/polcy=strict-fp32"], "no config group 'fitness/polcy'; did you mean fitness/policy?"),
    (["run", "search.generations=many"], "search.generations=many: a number expected (default 5)"),
    (["resume", "run_dir=x", "search.mu=3"], "unknown key 'search.mu' for `kernelevo resume`; it takes run_dir, "
                                             "search.generations"),
    (["resume"], "`kernelevo resume` needs run_dir=..."),
    (["report"], "`kernelevo report` needs run_dir=..."),
    (["bench", "bench.rot=KB"], "did you mean bench.root?"),
    (["seed", "problem.sede=x.py"], "did you mean problem.seed?"),
])
def test_bad_overrides_fail_in_one_line_naming_the_closest_key(tmp_path, args, message):
    assert message in one_line_error(kernelevo(*args, cwd=tmp_path))
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_run_that_fails_its_checks_writes_nothing(tmp_path):
    for bad in (["search.generations=-1"], ["problem.name=no_such_problem"], ["problem.sizes.bogus=3"],
                ["device=cuda:7"]):
        proc = kernelevo("run", *bad, cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert not list(tmp_path.iterdir()), f"{bad} left {list(tmp_path.rglob('*'))}"


def test_report_and_resume_of_a_missing_directory_are_errors_and_create_nothing(tmp_path):
    missing = tmp_path / "no" / "run"
    for command in ("report", "resume"):
        assert "does not exist" in one_line_error(kernelevo(command, f"run_dir={missing}", cwd=tmp_path))
    assert not (tmp_path / "no").exists()


def test_errors_name_the_fix_for_the_command_in_use(tmp_path):
    """`evaluate` takes candidate=PATH; a file has no seed of its own, so it says how to get one."""
    text = one_line_error(kernelevo("evaluate", f"problem={PROBLEMS / 'scale_shift.py'}", cwd=tmp_path))
    assert "pass candidate=PATH" in text and "kernelevo seed problem=" in text


def test_a_file_on_the_interpreter_is_shrunk_and_the_start_line_says_to_what(tmp_path):
    """KernelBench's sizes would time out on the interpreter: a file is shrunk by the stated rule (fitness/sizes.py),
    sizes set on the command line (no `+` needed) are kept, and the start line shows the sizes used."""
    big = tmp_path / "big_scale_shift.py"
    big.write_text((PROBLEMS / "scale_shift.py").read_text().replace("batch_size = 4", "batch_size = 4096")
                   .replace("dim = 100", "dim = 393216"))
    out = tmp_path / "r.json"
    proc = kernelevo("evaluate", f"problem={big}", f"candidate={CANDIDATES / 'good.py'}", "problem.sizes.batch_size=3",
                     "fitness.trials=1", f"out={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    dim = result["sizes"]["dim"]
    assert result["status"] == "ok" and result["sizes"]["batch_size"] == 3 and 3 * dim <= 16384
    start = next(line for line in proc.stdout.splitlines() if line.startswith("[kernelevo] problem"))
    assert f"problem big_scale_shift at batch_size=3, dim={dim} (shrunk for the interpreter" in start
    assert "the file's sizes: dim=393216" in start and "set by you: batch_size=3" in start
    assert "time (interpreter wall-clock): " in proc.stdout and "eager" not in proc.stdout


@pytest.mark.parametrize("what, expected", [
    ("problems", ["row_softmax: torch.softmax(x, dim=1) over a [4096, 8192] fp32 tensor",
                  "sizes batch_size=4096, dim=8192; on the CPU interpreter batch_size=5, dim=2500"]),
    ("profiles", ["h100_sxm: NVIDIA H100 SXM5 80GB (gpu); 132 SMs", "cpu_interpreter:"]),
    ("policies", ["triton: KernelBench tolerances", "strict-fp32: fp32 within 1e-4", "kernelbench: KernelBench rules"]),
    ("operators", ["offline: The offline (no-LLM) operators", "ParamMutation (1)", "llm: The LLM team as operators"]),
])
def test_list_shows_what_there_is_to_choose_from(tmp_path, what, expected):
    proc = kernelevo("list", what, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for text in expected:
        assert text in proc.stdout, proc.stdout
    assert "usage: kernelevo list {problems,profiles,policies,operators}" in kernelevo("list", "nope",
                                                                                        cwd=tmp_path).stderr
