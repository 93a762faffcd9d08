"""`kernelevo evaluate` end to end, as a user runs it."""
import json

import pytest

from conftest import CANDIDATES, SCALE_SHIFT, SESSION_HOME, kernelevo
from fitness.workers.pool import SANDBOXES, Lease

LEASE_END = Lease.end


def test_evaluate_bundled_seed_prints_a_verdict_and_writes_json(tmp_path, monkeypatch):
    ended = []  # how the command ends its sandbox's lease
    monkeypatch.setattr(Lease, "end", lambda self, keep: (ended.append((self.sandbox, keep)), LEASE_END(self, keep))[1])
    proc = kernelevo("evaluate", "problem=row_softmax", "fitness.trials=2", f"out={tmp_path}/r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no GPU: running kernels on the CPU through Triton's interpreter" in proc.stdout
    assert "status: ok  (seed)" in proc.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["status"] == "ok" and result["policy"]["name"] == "triton"
    assert result["sizes"]["dim"] == 2500  # the CPU test sizes were applied
    # its fork server is back in the process's pool, up, with no worker left (fitness.workers.pool)
    (sandbox, keep), = ended
    assert keep and SANDBOXES.idle[-1] is sandbox and sandbox.zygote_pid is not None and not sandbox._pool


def test_evaluate_a_candidate_file_under_another_policy(tmp_path):
    proc = kernelevo("evaluate", f"problem={SCALE_SHIFT}", f"candidate={CANDIDATES / 'torch_compute.py'}",
                     "fitness/policy=kernelbench", "fitness.trials=2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "uses-torch-compute" in proc.stdout and "policy: kernelbench" in proc.stdout
    assert list(tmp_path.glob("outputs/evaluate/*/*/result.json"))


def test_failed_candidate_exits_nonzero_with_the_reason(tmp_path):
    proc = kernelevo("evaluate", f"problem={SCALE_SHIFT}", f"candidate={CANDIDATES / 'wrong_math.py'}",
                     "fitness.trials=2", cwd=tmp_path)
    assert proc.returncode == 1
    assert "status: incorrect" in proc.stdout and "exceed atol" in proc.stdout


def test_bad_input_gets_a_clear_error(cli):
    code, _, err = cli("evaluate", "problem=nope")
    assert code == 2 and "problem=nope: no such option of the group problem" in err
    code, _, err = cli("evaluate", "problem=/no/such/problem.py")
    assert code == 2 and "neither a bundled problem" in err
    code, _, err = cli("evaluate", "problem=matmul", "candidate=/no/such.py")
    assert code == 2 and "candidate file '/no/such.py' not found" in err
    code, _, err = cli("evaluate", "problem=matmul", "fitness.trials=0")
    assert code == 2 and "fitness.trials must be at least 1" in err
    code, _, err = cli("evaluate", "fitness/policy=loose")
    assert code != 0 and "loose" in err


def test_no_command_prints_usage(cli):
    code, out, _ = cli()
    assert code == 2 and "evaluate" in out


def test_seed_writes_the_converted_inductor_seed_without_searching(tmp_path):
    out = tmp_path / "seed.py"
    proc = kernelevo("seed", "problem=layernorm", "problem.size_preset=test", f"out={out}", "inductor=none",
                     cwd=tmp_path)  # Inductor's default code only (the variants: the next test)
    assert proc.returncode == 0, proc.stderr
    assert f"written to {out}" in proc.stdout and "kernelevo evaluate problem=layernorm" in proc.stdout
    source = out.read_text()
    assert "class ModelNew" in source and "TUNABLE = " in source and "@triton.jit" in source
    compile(source, str(out), "exec")  # a module (that it passes the evaluator: tests/seeds/test_inductor_seed.py)
    assert list((SESSION_HOME / ".cache" / "kernelevo" / "inductor-seeds").glob("layernorm-*"))  # not in ~/.cache


@pytest.mark.slow
def test_seed_writes_each_inductor_variant_that_changes_the_kernels_next_to_the_seed(tmp_path):
    out = tmp_path / "seed.py"
    proc = kernelevo("seed", "problem=sum_reduction", "problem.size_preset=test", f"out={out}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in tmp_path.glob("seed*.py"))
    assert written == ["seed.py", "seed_nd_tiling.py"]  # the other three change nothing (dynamic shapes: issue 43)
    assert f"(inductor:nd_tiling; policy triton, cpu) written to {tmp_path / 'seed_nd_tiling.py'}" in proc.stdout
    proc = kernelevo("seed", "problem=sum_reduction", "problem.size_preset=test", f"out={tmp_path / 'only.py'}",
                     "inductor=none", cwd=tmp_path)
    assert proc.returncode == 0 and sorted(p.name for p in tmp_path.glob("only*.py")) == ["only.py"]
    mine = ["+inductor.variants.same={triton:{prefer_nd_tiling:true,tile_reductions:true}}",  # a user's own
            "+inductor.variants.typo={triton:{no_such_option:true}}", "~inductor.variants.nd_tiling"]
    proc = kernelevo("seed", "problem=sum_reduction", "problem.size_preset=test", f"out={tmp_path / 'mine.py'}",
                     *mine, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "variant 'same' wrote the kernels of" not in proc.stdout  # nd_tiling, which it repeats, was removed
    assert sorted(p.name for p in tmp_path.glob("mine*.py")) == ["mine.py", "mine_same.py"]
    assert "no seed from Inductor's variant 'typo'" in proc.stdout and "no_such_option" in proc.stdout
    assert "variant 'cooperative' wrote the kernels of inductor here: no seed of its own" in proc.stdout
