"""Problem loading: bundled names, KernelBench files by path, size overrides, clear errors."""
import pytest

from conftest import PROBLEMS, SCALE_SHIFT
from fitness.problem import (ProblemError, call_get_inputs, load_problem, resolve_problem, suite_manifest,
                             suite_names)


def test_bundled_suite_has_at_least_ten_problems_each_with_a_seed_and_test_sizes():
    manifest = suite_manifest()
    assert len(manifest) >= 10
    for name in manifest:
        spec = resolve_problem(name, size_preset="test")
        assert spec.sizes == manifest[name]["test_sizes"]
        assert "class ModelNew" in spec.seed_source()


def test_size_overrides_shrink_a_problem_loaded_from_a_path():
    problem = load_problem(resolve_problem(SCALE_SHIFT, sizes={"batch_size": 2, "dim": 7}))
    (x,) = call_get_inputs(problem)
    assert tuple(x.shape) == (2, 7)
    assert problem.spec.name == "scale_shift"


def test_test_preset_and_explicit_sizes_combine_explicit_last():
    spec = resolve_problem("row_softmax", sizes={"batch_size": 2}, size_preset="test")
    assert spec.sizes["batch_size"] == 2 and len(spec.sizes) >= 2


def test_unknown_size_constant_names_the_overridable_ones():
    with pytest.raises(ProblemError, match=r"'bogus' is not a module-level numeric constant.*\['batch_size', 'dim'\]"):
        load_problem(resolve_problem(SCALE_SHIFT, sizes={"bogus": 3}))


def test_missing_names_are_listed_with_the_file():
    path = PROBLEMS / "missing_get_inputs.py"
    with pytest.raises(ProblemError, match=r"missing_get_inputs\.py: .*does not define get_inputs"):
        load_problem(resolve_problem(str(path)))


def test_failing_get_inputs_names_the_file_and_the_error():
    problem = load_problem(resolve_problem(str(PROBLEMS / "failing_get_inputs.py")))
    with pytest.raises(ProblemError, match=r"failing_get_inputs\.py: get_inputs\(\) failed: NameError"):
        call_get_inputs(problem)


def test_unknown_problem_lists_the_bundled_names():
    with pytest.raises(ProblemError, match="neither a bundled problem") as err:
        resolve_problem("no_such_problem")
    assert suite_names()[0] in str(err.value)


def test_test_preset_needs_a_bundled_problem_or_sizes():
    with pytest.raises(ProblemError, match="only for bundled problems"):
        resolve_problem(SCALE_SHIFT, size_preset="test")


def test_kernelbench_file_with_module_level_sizes_loads_unchanged(tmp_path):
    # The shape of a KernelBench level-1 file, verbatim conventions: globals read inside get_inputs.
    path = tmp_path / "19_ReLU.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super(Model, self).__init__()\n\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.relu(x)\n\n"
        "batch_size = 16\ndim = 16384\n\n"
        "def get_inputs():\n    x = torch.randn(batch_size, dim)\n    return [x]\n\n"
        "def get_init_inputs():\n    return []  # No special initialization inputs needed\n")
    problem = load_problem(resolve_problem(str(path), sizes={"dim": 5}))
    assert tuple(call_get_inputs(problem)[0].shape) == (16, 5)
