"""A converted seed's forward checks the inputs its kernels were built for before any launch
(kernelevo/seeds/inductor/input_guard.py): a seed with its sizes baked in (a static capture: Inductor's literals)
refuses another size, a non-contiguous input, another dtype with a ValueError naming the expected and the given shape,
and launches nothing; a seed captured with dynamic shapes checks only what stayed specialised, and runs at other sizes."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from conftest import FIXTURES, TESTS
from fitness.problems.problem import resolve_problem
from kernelevo.seeds.inductor.convert import convert
from kernelevo.seeds.inductor.input_guard import GUARD

# torch.compile's capture of row_softmax at its test sizes (5 x 2500) on the CPU with dynamic shapes, kept as a file:
# kernelevo.seeds.inductor.capture.capture(spec.to_dict(), "cpu", dynamic=True)["default"]
DYNAMIC = TESTS / "fixtures" / "inductor_cpu" / "row_softmax_dynamic.json"


def module_of(source: str, folder: Path, name: str):
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class Launches:
    """Stands in for a kernel: records each launch, runs nothing."""

    def __init__(self):
        self.count = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.count += 1
        return launch


def test_a_baked_seed_refuses_other_inputs_with_a_value_error_before_any_launch(tmp_path):
    captured = json.loads((FIXTURES / "matmul_template.json").read_text())  # static, at M = N = K = 64, on an H100
    spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
    source = convert(captured, Path(spec.path).read_text(), spec.name, interpreter=True)
    assert f"{GUARD}('A', arg0_1, (64, 64), (64, 1), torch.float32, 'cpu')" in source
    module = module_of(source, tmp_path, "baked_matmul")
    kernel = module.triton_tem_fused_mm_0 = Launches()
    model = module.ModelNew()
    square = torch.randn(64, 64)
    with pytest.raises(ValueError, match=r"^ModelNew.forward: A expected shape \(64, 64\) .*given shape \(48, 64\)"):
        model(torch.randn(48, 64), square)
    with pytest.raises(ValueError, match=r"B expected shape \(64, 64\) \(strides \(64, 1\).*strides \(1, 64\)"):
        model(square, torch.randn(64, 64).t())  # the right shape, not contiguous
    with pytest.raises(ValueError, match=r"torch.float32.*given shape \(64, 64\) \(strides \(64, 1\), torch.float64"):
        model(square.double(), square)
    assert kernel.count == 0  # refused before any launch
    model(square, square)
    assert kernel.count == 1  # at the sizes it was built for it launches


def test_a_seed_captured_with_dynamic_shapes_runs_at_other_sizes_and_checks_the_rest(tmp_path):
    captured = json.loads(DYNAMIC.read_text())
    assert captured["dynamic"] and not captured["specialised"]
    spec = resolve_problem("row_softmax", size_preset="test")
    source = convert(captured, Path(spec.path).read_text(), spec.name)
    assert f"{GUARD}('x', arg2_1, (s77, s27), (s27, 1), torch.float32, 'cpu')" in source  # sizes of the input's own
    model = module_of(source, tmp_path, "dynamic_softmax").ModelNew()
    for shape in ((5, 2500), (5, 37), (3, 64)):  # the captured sizes and odd ones
        x = torch.randn(*shape)
        torch.testing.assert_close(model(x), torch.softmax(x, dim=1))
    with pytest.raises(ValueError, match=r"x expected shape \(5, 37\) \(strides \(37, 1\).*strides \(1, 5\)"):
        model(torch.randn(37, 5).t())  # contiguity stays checked
