"""kernelevo's direct convolution (kernelevo/seeds/kernels/conv.py's ``conv_direct_kernel``), the path a convolution
takes
where a group's GEMM is too small for tl.dot (depthwise: 1 input channel x the taps by 1 output channel): against
torch's conv1d/conv2d/conv3d with stride, padding, dilation, bias and a channel multiplier, a transposed one through
the same phases; the path chosen by the shapes; the capture never trying Inductor's Triton conv template for such a
model (on an H200 level1/84's template seed ran 2.2 s against cuDNN's 7.6 ms, autotuning it took 457 s); and a
depthwise KernelBench-style problem whose seed takes the direct path and is judged correct."""
import importlib
import importlib.util
import json
import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import kernelevo.seeds.kernels.conv as conv
from conftest import make_evaluator
from kernelevo.core.genome import Genome
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.kernels.conv import conv_nd, direct_path

TILES = dict(BLOCK_M=16, BLOCK_N=8)
KERNELS = ("conv_nd_kernel", "conv_direct_kernel", "conv_depthwise_kernel")


class Launches:
    """Counts the launches of a kernel of conv.py (standing in for it), then launches it."""

    def __init__(self, kernel):
        self.kernel, self.count = kernel, 0

    def __getitem__(self, grid):
        self.count += 1
        return self.kernel[grid]


@pytest.fixture
def launches(monkeypatch):
    counted = {name: Launches(getattr(conv, name)) for name in KERNELS}
    for name, launch in counted.items():
        monkeypatch.setattr(conv, name, launch)
    return counted


# functional, channels, multiplier (C_out / groups per input channel), kernel, stride, padding, dilation, bias, size
FORWARD = {
    "conv1d strided padded dilated, multiplier 2, bias": (F.conv1d, 3, 2, 3, 2, 2, 2, True, (9,)),
    "conv2d depthwise 3x3 (level1/84's form)": (F.conv2d, 4, 1, 3, 1, 0, 1, False, (5, 7)),
    "conv2d asymmetric stride, padding, dilation, multiplier 3, bias": (F.conv2d, 2, 3, (3, 2), (2, 1), (1, 2),
                                                                        (1, 2), True, (6, 5)),
    "conv3d strided dilated padded, multiplier 2": (F.conv3d, 2, 2, (2, 3, 2), (1, 2, 1), (1, 0, 1), (2, 1, 1),
                                                    False, (4, 5, 3)),
}


@pytest.mark.parametrize("case", FORWARD)
def test_a_depthwise_convolution_runs_as_the_depthwise_kernel_and_computes_what_torch_does(case, launches):
    functional, channels, multiplier, kernel, stride, padding, dilation, bias, size = FORWARD[case]
    dims = len(size)
    kernel = kernel if isinstance(kernel, tuple) else (kernel,) * dims
    torch.manual_seed(0)
    x = torch.randn(2, channels, *size)
    weight = torch.randn(channels * multiplier, 1, *kernel)
    b = torch.randn(channels * multiplier) if bias else None
    expected = functional(x, weight, b, stride, padding, dilation, channels)
    tuples = [v if isinstance(v, tuple) else (v,) * dims for v in (stride, padding, dilation)]
    got = conv_nd(x, weight, b, *tuples, False, (0,) * dims, channels, **TILES)
    assert got.shape == expected.shape and got.is_contiguous()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert [launches[name].count for name in KERNELS] == [0, 0, 1]
    forced = conv_nd(x, weight, b, *tuples, False, (0,) * dims, channels, **TILES, direct=False)  # the GEMM path
    torch.testing.assert_close(forced, expected, atol=1e-4, rtol=1e-4)
    assert [launches[name].count for name in KERNELS] == [1, 0, 1]


def test_a_grouped_convolution_of_two_input_channels_per_group_and_a_channels_last_output(launches):
    torch.manual_seed(0)
    x, weight, b = torch.randn(2, 6, 5, 6), torch.randn(9, 2, 2, 2), torch.randn(9)  # 3 groups: 2 in, 3 out each
    expected = F.conv2d(x, weight, b, 1, 1, 1, 3)
    channels_last = expected.to(memory_format=torch.channels_last).stride()
    got = conv_nd(x, weight, b, (1, 1), (1, 1), (1, 1), False, (0, 0), 3, out_stride=channels_last, BLOCK_M=8,
                  BLOCK_N=4)  # channel tiles across groups: 4 of 9 channels, then 4, then 1
    assert got.stride() == channels_last
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert launches["conv_direct_kernel"].count == 1 and launches["conv_nd_kernel"].count == 0


def test_a_transposed_depthwise_convolution_runs_each_phase_direct(launches):
    torch.manual_seed(0)
    x, weight, b = torch.randn(2, 3, 4, 5), torch.randn(3, 2, 3, 3), torch.randn(6)  # multiplier 2
    expected = F.conv_transpose2d(x, weight, b, (2, 2), (1, 0), (1, 1), 3, (1, 2))
    got = conv_nd(x, weight, b, (2, 2), (1, 0), (1, 2), True, (1, 1), 3, **TILES)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    assert launches["conv_direct_kernel"].count == 4 and launches["conv_nd_kernel"].count == 0  # 2 x 2 phases


def test_the_path_follows_the_size_of_a_groups_gemm():
    assert direct_path(1, 1, 9, 128)  # level1/84: depthwise 3x3
    assert direct_path(1, 1, 49, 32)  # depthwise 7x7: a reduction of 49, but one output channel per group
    assert direct_path(3, 16, 4, 1)  # level2/96's transposed phases of 1 to 4 taps x 3 input channels
    assert not direct_path(3, 16, 8, 1)  # ... and its phase of 8 taps: 24, a GEMM's
    assert not direct_path(64, 8, 9, 1)  # one group, few output channels: the GEMM's input tile serves them all
    assert not direct_path(32, 32, 9, 4)


def test_the_capture_never_tries_inductors_conv_templates(monkeypatch, tmp_path):
    capture = importlib.import_module("kernelevo.seeds.inductor.capture")
    import torch._inductor.config as inductor_config

    backends = []

    def capture_one(model, inputs, device, dynamic=False, gpu_lock=None, autotune_up_to=None, decompositions=None):
        backends.append(inductor_config.max_autotune_conv_backends)
        raise RuntimeError("Inductor failed")  # every attempt fails: each is tried

    monkeypatch.setattr(capture, "_capture_one", capture_one)
    spec = resolve_problem(str(_depthwise_problem(tmp_path)))
    default = inductor_config.max_autotune_conv_backends
    for model in (nn.Sequential(nn.Conv2d(8, 8, 3, groups=8), nn.Conv2d(8, 16, 1)),  # depthwise, then pointwise
                  nn.Sequential(nn.Conv2d(8, 32, 3), nn.Conv2d(32, 32, 3, groups=2))):  # dense: 16 by 16 per group
        backends.clear()
        with pytest.raises(RuntimeError, match="Inductor failed"):
            capture._first_that_converts(model, [], "cpu", spec, dynamic=True)
        assert backends == ["ATEN", "ATEN"]  # dynamic, then static shapes; never TRITON, not autotuned
    assert inductor_config.max_autotune_conv_backends == default  # patched for the capture only
    # with templates (policy triton on a GPU) Inductor's layout copies around the convolution are off too: an option
    # this torch has, so the capture sets it (``present`` drops a name the installed torch lacks)
    from kernelevo.seeds.inductor.template_choices import TEMPLATE_OPTIONS, present
    assert present(TEMPLATE_OPTIONS, inductor_config)["layout_optimization"] is False


DEPTHWISE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """level1/84_conv_depthwise_2D_asymmetric_input_square_kernel's form at interpreter sizes, with bias."""
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 bias: bool = False):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size=(kernel_size, kernel_size), stride=stride,
                                padding=padding, groups=in_channels, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)

batch_size = 2
in_channels = 4
out_channels = 4
kernel_size = 3
width_in = 7
height_in = 5
stride = 1
padding = 1

def get_inputs():
    return [torch.rand(batch_size, in_channels, height_in, width_in)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, True]
'''
# what Inductor writes for it on a GPU once the templates are not tried: the library call alone
LIBRARY_ONLY = ("def call(args):\n    arg0_1, arg1_1, arg2_1 = args\n    args.clear()\n"
                "    assert_size_stride(arg0_1, (4, 1, 3, 3), (9, 9, 3, 1), None)\n"
                "    buf0 = extern_kernels.convolution(arg2_1, arg0_1, arg1_1, stride=(1, 1), padding=(1, 1), "
                "dilation=(1, 1), transposed=False, output_padding=(0, 0), groups=4)\n"
                "    assert_size_stride(buf0, (2, 4, 5, 7), (140, 35, 7, 1), 'torch.ops.aten.convolution.default')\n"
                "    return (buf0, )\n")


def _depthwise_problem(folder):
    problem = folder / "84_conv_depthwise_2D_tiny.py"
    problem.write_text(textwrap.dedent(DEPTHWISE))
    return problem


def test_a_depthwise_problems_seed_is_kernelevos_direct_convolution_and_judged_correct(tmp_path, sandbox):
    problem = _depthwise_problem(tmp_path)
    spec = resolve_problem(str(problem))
    captured = {"code": LIBRARY_ONLY, "args": [{"kind": "param", "name": "conv2d.weight"},
                                               {"kind": "param", "name": "conv2d.bias"}, {"kind": "input", "index": 0}],
                "kernels": {}, "single_output": True, "device": "cpu"}
    source = seeds._checked_source(spec, json.loads(json.dumps(captured)), torch_compute_allowed=False)
    assert seeds.library_calls(source) == [] and "def conv_depthwise_kernel(" in source
    assert "conv_nd(arg2_1, arg0_1, arg1_1, (1, 1), (1, 1), (1, 1), False, (0, 0), 4," in source
    space = Genome.from_source(source).space  # what the direct path ignores is not tuned
    assert {"C0_BLOCK_M", "C0_BLOCK_N", "C0_NUM_WARPS"} <= set(space)
    assert not {"C0_BLOCK_K", "C0_GROUP_M", "C0_CHANNELS_LAST", "C0_W_PHASES"} & set(space)  # a forward one's too
    seed_file = tmp_path / "seed.py"  # the seed run here: its forward launches the depthwise kernel, once
    seed_file.write_text(source)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location("depthwise_seed", seed_file))
    module.__spec__.loader.exec_module(module)
    counted = {name: Launches(getattr(module, name)) for name in KERNELS}
    vars(module).update(counted)
    reference = importlib.util.module_from_spec(importlib.util.spec_from_file_location("depthwise", problem))
    reference.__spec__.loader.exec_module(reference)
    torch.manual_seed(0)
    model = reference.Model(*reference.get_init_inputs())
    new = module.ModelNew(*reference.get_init_inputs())
    new.load_state_dict(model.state_dict())
    x = reference.get_inputs()[0]
    torch.testing.assert_close(new(x), model(x), atol=1e-4, rtol=1e-4)
    assert [counted[name].count for name in KERNELS] == [0, 0, 1]
    with make_evaluator(problem=str(problem), policy="triton", sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and result.guards["torch_compute_ops"] == [], result.reason


@pytest.mark.slow
def test_a_depthwise_problem_captured_on_the_cpu_gets_a_seed_policy_triton_judges_correct(tmp_path, sandbox):
    problem = _depthwise_problem(tmp_path)
    spec = resolve_problem(str(problem))
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache")
    assert "conv_nd(" in source and "def conv_direct_kernel(" in source and seeds.library_calls(source) == []
    with make_evaluator(problem=str(problem), sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason
