"""Seeds taken from torch.compile (operators/inductor_seed): Inductor's Triton kernels, converted into a standalone
candidate, pass the full evaluator; the seed is cached and written into the run directory; library calls under
policy `triton` get a clear way out; a KernelBench-format file without a seed runs offline from its Inductor seed.
On the CPU, Inductor is asked for Triton code, which Triton's interpreter runs."""
import ast

import pytest

from conftest import SCALE_SHIFT, make_evaluator, read_store
from fitness.genome import Genome
from fitness.problem import resolve_problem
from operators import inductor_seed as seeds
from operators.inductor_seed.convert import SeedError, convert
from test_search import TINY, kernelevo, run_dir_of


@pytest.mark.parametrize("name", ["layernorm"])  # more kinds of kernel, captured on a GPU: test_inductor_fixtures
def test_an_inductor_seed_is_a_correct_standalone_candidate_with_inductors_launch_configuration(name):
    sizes = {"batch_size": 4, "dim": 256}  # small: the interpreter runs Inductor's reduction in seconds
    spec = resolve_problem(name, sizes=sizes)
    captured = seeds.capture(spec, "cpu")
    source = convert(captured, open(spec.path).read(), name)
    tree = ast.parse(source)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert kernels and all(ast.unparse(k.decorator_list[0]) == "triton.jit" and len(k.decorator_list) == 1
                           for k in kernels)
    assert {k.name for k in kernels} == set(captured["kernels"])  # Inductor's kernels, under Inductor's names
    assert "triton_heuristics" not in source and "async_compile" not in source and "empty_strided_c" not in source
    genome = Genome.from_source(source)
    for index, kernel in enumerate(kernels):
        chosen = captured["kernels"][kernel.name]["configs"][0]
        for param, value in chosen["kwargs"].items():
            if f"K{index}_{param}" in genome.space:
                assert genome.params[f"K{index}_{param}"] == value and value in genome.space[f"K{index}_{param}"]
        assert genome.params[f"K{index}_NUM_WARPS"] == chosen["num_warps"]
    with make_evaluator(problem=name, sizes=sizes) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason


def test_the_seed_is_cached_per_problem_and_written_into_the_run_directory(tmp_path, monkeypatch):
    spec = resolve_problem("rmsnorm", size_preset="test")
    first = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache", tmp_path)
    assert (tmp_path / seeds.SEED_FILE).read_text() == first

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(seeds, "capture", no_compile)
    assert seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache") == first
    other_sizes = resolve_problem("rmsnorm", sizes={"batch_size": 3}, size_preset="test")
    with pytest.raises(AssertionError, match="compiled again"):  # other sizes: another seed
        seeds.inductor_seed(other_sizes, "cpu", "cpu_interpreter", tmp_path / "cache")


def test_library_calls_left_by_inductor_are_refused_under_policy_triton_with_the_way_out(tmp_path):
    spec = resolve_problem("matmul_bias_relu", size_preset="test")
    with pytest.raises(SeedError, match="fitness/policy=kernelbench") as refused:
        seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path)
    assert "torch.addmm" in str(refused.value)
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path, torch_compute_allowed=True)
    assert seeds.library_calls(source) == ["torch.addmm"]
    with make_evaluator(problem="matmul_bias_relu", policy="kernelbench", size_preset="test") as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and "uses-torch-compute" in result.label, (result.status, result.reason)


def test_a_problem_file_without_a_seed_runs_offline_from_its_inductor_seed(tmp_path):
    proc = kernelevo("run", f"problem={SCALE_SHIFT}", *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = run_dir_of(proc.stdout)
    seed_file = run_dir / seeds.SEED_FILE
    assert seed_file.is_file() and "@triton.jit" in seed_file.read_text()
    operators = read_store(run_dir, lambda store: {i.operator for i in store.individuals() if i.generation == 0})
    assert "inductor" in operators
    assert (run_dir / "best_kernel.py").is_file()
