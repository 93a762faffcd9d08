"""A compiler seed whose TF32 dot products miss the tolerance is tried again with IEEE fp32 dot products before it
is given up (kernelevo/seeds/inductor/precision.py, evo/runs/seeding.py): level2/14's case, where all 52 evaluations of
a run from the TF32 GEMM seed were incorrect."""
import json

import pytest

import evo.service.evaluation
from conftest import CANDIDATES, FIXTURES, TINY, kernelevo, read_store, run_dir_of
from evo.benchmark.bench_report import tf32_note
from evo.reports.outcome import RunOutcome
from kernelevo.seeds.inductor.cache import CapturedSeeds
from kernelevo.seeds.inductor.precision import IEEE_NOTE, ieee_dots

TF32_SEED = (CANDIDATES / "tf32_inexact_matmul.py").read_text()


def test_every_tf32_choice_of_a_kernel_becomes_ieee_and_a_kernel_without_one_is_left_alone():
    template = json.loads((FIXTURES / "matmul_template.json").read_text())["code"]
    assert ieee_dots(template) is None  # captured with TF32 off: nothing to rewrite
    tf32 = template.replace("ALLOW_TF32 : tl.constexpr = False", "ALLOW_TF32 : tl.constexpr = True")
    assert ieee_dots(tf32) == IEEE_NOTE + template.replace("ALLOW_TF32 : tl.constexpr = False",
                                                           "ALLOW_TF32: tl.constexpr = False")
    dots = "c = tl.dot(a, b, allow_tf32=True)\nd = tl.dot(a, b, input_precision='tf32x3')\n" \
           "e = tl.dot(a, b, input_precision=\"tf32\")\n"
    assert ieee_dots(dots) == IEEE_NOTE + "c = tl.dot(a, b, allow_tf32=False)\n" \
        "d = tl.dot(a, b, input_precision='ieee')\ne = tl.dot(a, b, input_precision='ieee')\n"


@pytest.mark.slow
def test_a_compiler_seed_incorrect_with_tf32_starts_the_search_with_ieee_fp32_dots(tmp_path, monkeypatch):
    monkeypatch.setattr(evo.service.evaluation, "inductor_seeds",
                        lambda *args, **kwargs: CapturedSeeds({"inductor": TF32_SEED}))
    proc = kernelevo("run", "problem=matmul", "problem.seed=inductor", "inductor=none", *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inductor's seed is incorrect with TF32 dot products; with IEEE fp32 dot products it is correct" \
        in proc.stdout
    run_dir = run_dir_of(proc.stdout)
    first, judged = read_store(run_dir, lambda store: (
        {i.id: (i.operator, i.result.status, i.genome.source) for i in store.individuals() if i.generation == 0},
        [r.status for r in store.evaluations().values()]))
    operator, status, source = first["0.0"]
    assert operator == "inductor" and status == "ok"
    assert source.startswith(IEEE_NOTE) and "ALLOW_TF32: tl.constexpr = False" in source
    assert "incorrect" in judged  # the TF32 seed itself was judged first
    # torch.compile's own kernels fail the policy with TF32, and its baseline is timed with TF32: the table says so
    summary = RunOutcome.read(run_dir)
    assert summary.baselines_tf32_incorrect == ["compile"]
    assert tf32_note(summary) == ("torch.compile: Inductor's kernels for it were incorrect with TF32 dot products (as "
                                  "seeds), yet it is timed with TF32")
