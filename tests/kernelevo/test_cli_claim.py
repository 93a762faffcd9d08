"""Issue 44: a run directory is claimed for a command's life (two runs started together: one runs, the other is
refused in one line and writes nothing; also `resume`), a claim left by a dead process blocks nothing, and a run that
fails with a user's error before its first evaluation leaves its directory as it found it (issue 67: a bug leaves it
as the run made it)."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from conftest import kernelevo, read_store

TINY = ["search=tiny", "search.generations=0", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]


def a_run(run_dir, problem="elementwise_chain"):
    """A run directory holding a run, as `kernelevo run` leaves one: its config and an evaluation in run.db."""
    from evo.records.store import RunStore
    from kernelevo.core.evaluation_record import EvalResult

    store = RunStore(run_dir)
    store.set_meta("config", {"problem": {"name": problem}})
    store.add_evaluation("k", EvalResult(status="ok", time_s=1.0))
    store.close()


@pytest.mark.slow
def test_two_runs_started_together_into_one_directory_one_runs_and_the_other_writes_nothing(tmp_path):
    """Issue 44 point 1: both finished and mixed their stores (run A's table was run B's)."""
    procs = {problem: kernelevo("run", f"problem={problem}", *TINY, "hydra.run.dir=D", cwd=tmp_path, wait=False)
             for problem in ("row_softmax", "rmsnorm")}  # started together, before either has written anything
    outs = {problem: proc.communicate(timeout=600)[0] for problem, proc in procs.items()}
    codes = {problem: proc.returncode for problem, proc in procs.items()}
    assert sorted(codes.values()) == [0, 2], outs
    winner = next(problem for problem, code in codes.items() if code == 0)
    loser = next(problem for problem, code in codes.items() if code == 2)
    lines = outs[loser].strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in outs[loser], outs[loser]
    # on a loaded machine the second process may reach its claim only after the first has ended (seen at load 12
    # on 2 cores): then it meets the finished run's refusal instead; either way it writes nothing
    if "holds a run already" not in lines[0]:
        assert lines[0].startswith(f"kernelevo: error: {tmp_path / 'D'} is in use by another kernelevo process "
                                   f"(pid {procs[winner].pid}, kernelevo run, since ")
        assert lines[0].endswith("wait for it to end, or start this run in another directory (hydra.run.dir=NEW_DIR)")
    else:
        assert lines[0].startswith("kernelevo: error: ")
    # the store is the winner's alone: its config, its kernels, its table
    assert read_store(tmp_path / "D", lambda store: store.get_meta("config")["problem"]["name"]) == winner
    assert json.loads((tmp_path / "D" / "summary.json").read_text())["problem"] == winner
    assert not (tmp_path / "D" / ".kernelevo.lock").exists()  # given back at the end
    again = kernelevo("run", f"problem={loser}", *TINY, "hydra.run.dir=D", cwd=tmp_path)
    assert again.returncode == 2 and "holds a run already" in again.stderr  # the old refusal, once it has ended


HOLDER = textwrap.dedent("""
    import sys, time
    from evo.records.claim import Claim
    Claim(sys.argv[1], what="kernelevo resume").acquire()
    print("held", flush=True)
    time.sleep(600)
""")


def test_a_claim_blocks_a_resume_while_its_process_lives_and_nothing_once_it_is_dead(cli, tmp_path):
    """`resume` claims its run_dir too; the lock of a process killed with -9 (no handler ran, its file stays) is
    the kernel's to drop: it blocks nobody."""
    from evo.records.claim import CLAIM_FILE, Claim, DirectoryInUse

    run_dir = tmp_path / "D"
    a_run(run_dir)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in run_dir.iterdir())
        code, out, err = cli("resume", f"run_dir={run_dir}")
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert (f"{run_dir} is in use by another kernelevo process (pid {holder.pid}, kernelevo resume, since "
                in err and err.strip().endswith("resume it once that process has ended"))
        assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written
        assert read_store(run_dir, lambda store: store.evaluation_count()) == 1
        with pytest.raises(DirectoryInUse, match=f"pid {holder.pid}"):
            Claim(run_dir).acquire()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    assert (run_dir / CLAIM_FILE).is_file()  # the dead process's lock file is still there...
    with Claim(run_dir) as claim:  # ...and blocks nothing
        assert f"pid {os.getpid()}" in (run_dir / CLAIM_FILE).read_text()
        assert claim.folder == run_dir
    assert not (run_dir / CLAIM_FILE).exists()


def test_undo_puts_a_directory_back_as_the_claim_found_it(tmp_path):
    from evo.records.claim import Claim

    with Claim(tmp_path / "new") as claim:
        (tmp_path / "new" / "run.db").write_text("x")
        claim.undo()
    assert not (tmp_path / "new").exists()  # the claim made it: removed
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "notes.txt").write_text("mine")
    with Claim(tmp_path / "old") as claim:
        (tmp_path / "old" / ".hydra").mkdir()
        (tmp_path / "old" / "run.db").write_text("x")
        claim.undo()
    assert [p.name for p in (tmp_path / "old").iterdir()] == ["notes.txt"]


BROKEN = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):  # runs eagerly (the reference check passes); torch.compile, the seed's capture, fails
        def forward(self, x):
            if torch.compiler.is_compiling():
                raise RuntimeError("this reference cannot be compiled")
            return x * 2


    def get_inputs():
        return [torch.randn(8, 8)]


    def get_init_inputs():
        return []
""")


@pytest.mark.slow
def test_a_run_that_fails_before_its_first_evaluation_leaves_its_directory_as_it_found_it(tmp_path, monkeypatch):
    """Issue 44 point 6: a run whose seed capture failed left a run.db behind, which then blocked the same
    directory ("holds a run already") and had nothing to report."""
    from kernelevo.seeds import inductor as seeds

    problem = tmp_path / "broken.py"
    problem.write_text(BROKEN)
    once = ["inductor=none"]  # the capture fails the same under every variant: one compile each, not five
    real, captured = seeds.capture_variants, []
    monkeypatch.setattr(seeds, "capture_variants", lambda *a, **k: captured.append(real(*a, **k)) or captured[-1])
    failed = kernelevo("run", f"problem={problem}", *TINY, *once, "hydra.run.dir=D", cwd=tmp_path)
    assert failed.returncode == 2 and "holds a run already" not in failed.stderr, failed.stdout + failed.stderr
    assert not (tmp_path / "D").exists()  # the run made it: nothing left
    assert len(captured) == 1 and "this reference cannot be compiled" in captured[0]["default"]["error"]
    # the runs below fail the same: torch.compile's failure, as that capture gave it (a failure is not cached, so
    # each run captures again: test_seed_cache.py), without a capture process each (a Python start, torch, Dynamo)
    monkeypatch.setattr(seeds, "capture_variants", lambda *a, **k: captured[0])
    (tmp_path / "E").mkdir()
    (tmp_path / "E" / "notes.txt").write_text("mine")
    for _ in range(2):  # the same directory again: the same error, not "holds a run already"
        again = kernelevo("run", f"problem={problem}", *TINY, *once, "hydra.run.dir=E", cwd=tmp_path)
        assert again.returncode == 2 and "holds a run already" not in again.stderr, again.stderr
        assert f"nothing evaluated: nothing kept in {tmp_path / 'E'}; run it again there once fixed" in again.stderr
        assert [p.name for p in (tmp_path / "E").iterdir()] == ["notes.txt"]  # as it was: no .hydra/, no run.db


def test_looking_for_a_run_writes_nothing_into_a_store_being_made(tmp_path):
    """The check before the claim reads another process's store, which may be being made: it must not write to it
    (the tables and schema version are its maker's to write)."""
    from evo.records.store import DB_NAME, RunStore

    (tmp_path / DB_NAME).write_bytes(b"")  # connected to, nothing written yet
    assert RunStore.saved_run(tmp_path) is None and (tmp_path / DB_NAME).read_bytes() == b""
    a_run(tmp_path / "D")
    assert RunStore.saved_run(tmp_path / "D") == {"problem": {"name": "elementwise_chain"}}


def test_a_bench_dir_or_a_seeds_absolute_out_is_hydras_output_directory(tmp_path):
    """Issue 68: each bench given a bench.dir, or seed an absolute out=, left a near-empty outputs/.../.hydra folder
    (Hydra makes its output directory whatever the command writes)."""
    from omegaconf import OmegaConf

    from kernelevo.locations import own_folder

    named = tmp_path / "outputs" / "x"  # the folder the config names
    bench = OmegaConf.create({"bench": {"dir": str(tmp_path / "b")}})
    assert own_folder("bench", bench, named) == tmp_path / "b"
    assert own_folder("bench", OmegaConf.create({"bench": {"dir": None}}), named) == named  # the bench's own folder
    assert own_folder("seed", OmegaConf.create({"out": str(tmp_path / "s" / "seed.py")}), named) == tmp_path / "s"
    assert own_folder("seed", OmegaConf.create({"out": "seed.py"}), named) == named  # relative: inside it
    assert own_folder("run", OmegaConf.create({}), named) == named


def test_a_bug_inside_a_run_keeps_its_traceback_and_its_directory(tmp_path, monkeypatch):
    """Issue 67: the commands took any ValueError for a user's error, so a bug inside a run (a failed unpacking, a
    shape error) was said in one line and, nothing evaluated yet, its directory removed with the evidence. Only a
    KernelevoError is a user's error now: a bug ends the run with its traceback and leaves the directory as the run
    made it (its config, its store)."""
    from evo.records.store import DB_NAME
    from evo.service.evaluation import LocalEvaluators

    def bug(*args, **kwargs):
        raise ValueError("not enough values to unpack (expected 2, got 1)")

    monkeypatch.setattr(LocalEvaluators, "service", bug)  # inside the run: its store made, nothing evaluated
    failed = kernelevo("run", "problem=elementwise_chain", *TINY, "hydra.run.dir=D", cwd=tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Traceback" in failed.stderr and "ValueError: not enough values to unpack" in failed.stderr, failed.stderr
    assert "kernelevo: error:" not in failed.stderr and "nothing kept" not in failed.stderr
    assert (tmp_path / "D" / DB_NAME).is_file() and (tmp_path / "D" / ".hydra" / "config.yaml").is_file()
    assert read_store(tmp_path / "D", lambda store: store.get_meta("config"))["problem"]["name"] == "elementwise_chain"
