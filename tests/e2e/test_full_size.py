"""Without a GPU a run says how it chooses (by interpreter wall-clock, at the test sizes) and keeps as its best a
kernel that runs at other sizes too (evo/runs/other_sizes.py; its record said by evo/reports/sizes_record.py): a
bundled problem's size-generic best is kept; a fastest kernel with the test sizes baked in is not, when a slower one
runs at other sizes; when every kernel tried is baked (a run from torch.compile's kernels captured at the test sizes),
the best is flagged as baked. The other sizes differ from the test sizes in every size constant that can change
(fitness.problems.sizes.other_sizes)."""
import json

import pytest

from conftest import CANDIDATES, DEVICE, PROBLEMS, SCALE_SHIFT, TINY, kernelevo, make_evaluator, read_store, run_dir_of
from evo.reports.sizes_record import flagged
from evo.runs.other_sizes import TRIES, SizesCheck
from evo.reports.outcome import summarise
from kernelevo.core.genome import code_hash
from kernelevo.core.individual import LAUNCHES
from fitness.problems.problem import load_problem, resolve_problem, suite_manifest
from fitness.problems.sizes import MIN_SHRINKABLE, odd_value, other_sizes, other_value
from fitness.workers.zygote import Zygote
from kernelevo.seeds import inductor as seeds
from fakes import GENERIC, GUARDED, WRONG_MASK, judge_plan, sizes_run_store

ZYGOTE_INIT = Zygote.__init__
PAIRED = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


batch_size = 32
dim = 100
half = 50  # dim must stay 2 * half: neither changes alone
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, dim).view(batch_size, 2, half)]


def get_init_inputs():
    return []
'''


def run(*args, cwd):
    """`kernelevo run` on the interpreter."""
    proc = kernelevo("run", *args, *TINY, cwd=cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    return proc.stdout, run_dir, json.loads((run_dir / "summary.json").read_text())


def fastest_and_individuals(run_dir):
    return read_store(run_dir, lambda store: (store.latest_checkpoint().hall_of_fame[0],
                                              {ind.id: ind for ind in store.individuals()}))


def test_other_sizes_change_every_size_constant_that_can_change(tmp_path):
    for name in ("matmul", "maxpool2d", "small_attention"):  # sizes of 1-2 grow, the others shrink
        spec = resolve_problem(name, size_preset="test")
        other = other_sizes(load_problem(spec))
        assert other.changed == {k: other_value(v) for k, v in spec.sizes.items()} and not other.unchanged
        assert all(other.changed[k] != v for k, v in spec.sizes.items())
    problem = tmp_path / "paired.py"
    problem.write_text(PAIRED)
    loaded = load_problem(resolve_problem(str(problem), size_preset="test"))
    other = other_sizes(loaded)
    # batch_size changes; dim and half cannot change alone or together; kernel_size is below MIN_SHRINKABLE
    assert 3 < MIN_SHRINKABLE and other.changed == {"batch_size": 24} and other.unchanged == ["dim", "half"]
    assert loaded.sizes == {"batch_size": 32, "dim": 100, "half": 50, "kernel_size": 3}  # the module is restored
    load_problem(resolve_problem(str(problem), sizes=other.sizes))  # the other sizes make a problem


@pytest.mark.slow
def test_a_bundled_problems_best_runs_at_other_sizes_and_is_kept(tmp_path, monkeypatch):
    started = []  # the fork servers the run starts: the check at other sizes runs in the search's sandbox (one
    # given back by an earlier run of this process, fitness.workers.pool, or one it starts)
    monkeypatch.setattr(Zygote, "__init__", lambda self, *a, **k: (started.append(a), ZYGOTE_INIT(self, *a, **k))[1])
    output, run_dir, summary = run("problem=elementwise_chain", cwd=tmp_path)
    assert len(started) <= 1, started
    assert f"[kernelevo] kernels ranked by {LAUNCHES}" in output
    test_sizes = suite_manifest()["elementwise_chain"]["test_sizes"]
    fastest, individuals = fastest_and_individuals(run_dir)
    assert summary["status"] == "ok" and summary["ranked_by"] == LAUNCHES
    assert summary["other_sizes"] == {k: other_value(v) for k, v in test_sizes.items()}
    assert summary["other_sizes_tried"][0] == fastest and summary["other_sizes_failed"] == {}  # all size-generic
    assert summary["baked_seeds"] == []
    best = (run_dir / "best_kernel.py").read_text()
    assert code_hash(best) == code_hash(individuals[fastest].genome.rendered())
    assert summary["best_s"] == individuals[fastest].time_s


@pytest.mark.slow
def test_a_baked_fastest_kernel_is_not_kept_when_a_slower_one_runs_at_other_sizes(tmp_path):
    # scale_shift's full sizes are 4 x 100; judged at 4 x 60, the test sizes of baked_or_generic's BAKED=1 variant
    # one trial per individual: the seed keeps BAKED=0 as written (a tuner would move every individual to the
    # faster BAKED=1, its only other choice), and children of the parameter mutation get BAKED=1
    _, run_dir, summary = run(f"problem={SCALE_SHIFT}", f"problem.seed={CANDIDATES / 'baked_or_generic.py'}",
                              "problem.sizes.dim=60", "search.tuner.trials=1", cwd=tmp_path)
    fastest, individuals = fastest_and_individuals(run_dir)
    assert individuals[fastest].genome.params["BAKED"] == 1, "the search did not find the baked variant fastest"
    assert summary["other_sizes"] == {"dim": 45}
    assert summary["other_sizes_tried"][0] == fastest and "output has shape (4, 60), expected (4, 45)" in \
        summary["other_sizes_failed"][fastest]
    kept = next(i for i in summary["other_sizes_tried"] if i not in summary["other_sizes_failed"])  # fastest first
    assert individuals[kept].genome.params["BAKED"] == 0
    assert summary["status"] == "ok" and summary["best_s"] == individuals[kept].time_s > individuals[fastest].time_s
    best = (run_dir / "best_kernel.py").read_text()
    assert code_hash(best) == code_hash(individuals[kept].genome.rendered())


@pytest.mark.slow
def test_a_compiler_seed_captured_with_dynamic_shapes_runs_at_other_sizes_and_is_not_called_baked(tmp_path):
    # a file without a seed starts from torch.compile's kernels, captured at the test sizes (4 x 60) with dynamic
    # shapes: every size is read from the input, so the best runs at the other sizes (and the file's own)
    output, run_dir, summary = run(f"problem={SCALE_SHIFT}", "problem.sizes.dim=60", "inductor=none", cwd=tmp_path)
    fastest, individuals = fastest_and_individuals(run_dir)
    # the file without a seed ran offline from its Inductor seed (once in tests/seeds/test_inductor_seed.py: a run less)
    seed_file = run_dir / seeds.SEED_FILE
    assert seed_file.is_file() and "@triton.jit" in seed_file.read_text()
    assert "inductor" in {i.operator for i in individuals.values() if i.generation == 0}
    assert (run_dir / "best_kernel.py").is_file()
    assert "compiler seeds (inductor) were captured with dynamic shapes" in output
    assert summary["status"] == "ok" and summary["baked_seeds"] == []
    assert summary["other_sizes_tried"][0] == fastest and summary["other_sizes_failed"] == {}
    forward = (run_dir / "seed_inductor.py").read_text().split("def forward")[1]
    assert ".size(1)" in forward and "60" not in forward  # the input's width, not the captured literal
    assert not (run_dir / "best_kernel.py").read_text().startswith("# kernelevo: BAKED")


@pytest.mark.slow
def test_when_every_kernel_tried_is_baked_the_best_is_flagged(tmp_path):
    # (issue 43 changed this test's problem: scale_shift's compiler seed now reads its sizes from its input.) Here
    # Dynamo specialises the LayerNorm's sizes even with dynamic shapes: the seed, captured at 16 x 48, is baked there
    _, run_dir, summary = run(f"problem={PROBLEMS / 'sequential_norms.py'}", "problem.sizes.dim=48", "inductor=none",
                              cwd=tmp_path)
    fastest, individuals = fastest_and_individuals(run_dir)
    assert "Dynamo specialised block.0.weight dim 0 = 48" in (run_dir / "seed_inductor.py").read_text()
    assert summary["status"] == "baked-at-test-sizes" and summary["baked_seeds"] == ["inductor"]
    tried = summary["other_sizes_tried"]
    correct = {ind.key for ind in individuals.values() if ind.ok}
    assert tried[0] == fastest and len(tried) == min(TRIES, len(correct))
    assert set(summary["other_sizes_failed"]) == set(tried)
    # its guard refuses the other sizes before any launch: a clean refusal at each, not a defect
    assert summary["other_sizes_verdicts"][fastest]["verdict"] == "refuses-cleanly"
    assert [size["at"] for size in summary["other_sizes_verdicts"][fastest]["sizes"]] == \
        ["batch_size=12, dim=36", "batch_size=11, dim=35"]
    # the batch stayed symbolic (its own size expected), the normalised dimension a literal
    assert "ValueError: ModelNew.forward: x expected shape (12, 48) (strides (48, 1), torch.float32, cpu), given " \
           "shape (12, 36)" in summary["other_sizes_failed"][fastest]
    best = (run_dir / "best_kernel.py").read_text()
    assert best.startswith("# kernelevo: BAKED AT THE TEST SIZES dim=48")
    assert code_hash(best) == code_hash(individuals[fastest].genome.rendered())  # still written: the fastest


def test_odd_other_sizes_are_odd_smaller_and_differ_from_the_first(tmp_path):
    spec = resolve_problem("matmul", size_preset="test")
    first, odd = (other_sizes(load_problem(spec), odd=o) for o in (False, True))
    assert odd.changed == {k: odd_value(v) for k, v in spec.sizes.items()} and not odd.unchanged
    assert all(v % 2 == 1 and v != first.changed[k] for k, v in odd.changed.items())
    assert [odd_value(v) for v in (16, 60, 100, 4096)] == [11, 43, 73, 3071]  # below about 3/4: 12, 45, 75, 3072


@pytest.mark.parametrize("variants, kept, chosen, status", [
    ([WRONG_MASK, GUARDED, GENERIC], "1.0", "1.0", "ok"),  # runs at the other sizes: the slowest, kept
    ([WRONG_MASK, GUARDED], None, "1.0", "baked-at-test-sizes"),  # refuses them cleanly: the best, baked
    ([WRONG_MASK], None, None, "defective-at-other-sizes")])  # nothing fit: the fastest, flagged
def test_on_the_interpreter_the_best_is_never_defective_at_other_sizes(tmp_path, sandbox, variants, kept, chosen,
                                                                       status):
    with make_evaluator(SCALE_SHIFT, sizes={"dim": 60}, sandbox=sandbox, trials=1) as evaluator:
        check = SizesCheck.plan(judge_plan(SCALE_SHIFT, DEVICE), evaluator, [])
    assert (check.test_sizes, [changed for changed, _ in check.sets]) == ({"dim": 60}, [{"dim": 45}, {"dim": 43}])
    store, checkpoint = sizes_run_store(tmp_path, variants)
    record = check.judge(store, checkpoint, 1, sandbox)
    assert (record["kept"], record["chosen"]) == (kept, chosen)
    outcome = summarise(store, checkpoint)
    assert outcome.status == status and outcome.best_id == (chosen or checkpoint.hall_of_fame[0])
    assert outcome.other_sizes_verdicts[checkpoint.hall_of_fame[0]]["verdict"] == "defective"
    header = flagged("src", record).splitlines()[0]
    assert header == "src" if status == "ok" else header.startswith(
        "# kernelevo: BAKED AT THE TEST SIZES dim=60" if chosen else "# kernelevo: DEFECTIVE AT OTHER SIZES")
    store.close()
