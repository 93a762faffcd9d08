"""kernelevo's own Triton convolution (kernelevo/seeds/kernels/conv.py) and how it enters a seed
(kernelevo/seeds/inductor/convolutions.py):
every kind of torch.convolution against torch through Triton's interpreter; Inductor's library convolution call
rewritten into a tunable launch of it; a KernelBench-style transposed convolution (level1/57's form, at interpreter
sizes) and a transposed 3D convolution with pointwise work after it (level2/3's form) get seeds that policy
`triton` judges correct."""
import ast
import json
import textwrap

import pytest
import torch

from conftest import FIXTURES, kernelevo, make_evaluator
from kernelevo.core.genome import Genome
from fitness.evaluation.evaluator import default_cache_dir
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.convert import convert
from kernelevo.seeds.inductor.convolutions import Convolutions, kernel_source, launcher_defaults
from kernelevo.seeds.inductor.errors import SeedError
from hardware_profiles.tiles import TILE_PARAMS, tile_starts
import kernelevo.seeds.kernels.conv as conv
from kernelevo.seeds.kernels.conv import conv_nd

# dims, in channels, out channels, kernel, stride, padding, dilation, groups, transposed, output_padding, bias
CASES = {
    "conv1d": (1, 4, 6, 3, 1, 0, 1, 1, False, 0, True),
    "conv1d strided dilated grouped": (1, 4, 6, 3, 2, 1, 2, 2, False, 0, False),
    "conv2d grouped dilated strided padded": (2, 4, 6, (3, 2), (2, 1), (1, 2), (2, 1), 2, False, 0, True),
    "conv2d depthwise": (2, 4, 4, 3, 1, 1, 1, 4, False, 0, False),
    "conv3d": (3, 2, 4, 3, (1, 2, 1), 1, 1, 1, False, 0, True),
    "conv_transpose1d": (1, 4, 6, 3, 2, 1, 2, 2, True, 1, True),
    "conv_transpose2d": (2, 4, 6, (3, 2), (2, 3), (1, 0), (2, 1), 2, True, (1, 2), True),
    "conv_transpose2d plain": (2, 3, 5, 3, 1, 0, 1, 1, True, 0, False),
    "conv_transpose3d": (3, 2, 4, 3, 2, 1, 1, 2, True, 1, False),
}


def _dims(value, dims: int) -> tuple:
    return tuple(value) if isinstance(value, tuple) else (value,) * dims


@pytest.mark.parametrize("case", CASES)
def test_kernelevos_convolution_computes_what_torch_does(case):
    dims, c_in, c_out, kernel, stride, padding, dilation, groups, transposed, output_padding, bias = CASES[case]
    torch.manual_seed(0)
    x = torch.randn(2, c_in, *[4 if dims == 3 else 6] * dims)
    shape = (c_in, c_out // groups) if transposed else (c_out, c_in // groups)
    weight = torch.randn(*shape, *_dims(kernel, dims))
    b = torch.randn(c_out) if bias else None
    args = (_dims(stride, dims), _dims(padding, dims), _dims(dilation, dims), transposed,
            _dims(output_padding, dims), groups)
    expected = torch.convolution(x, weight, b, *args)
    got = conv_nd(x, weight, b, *args, BLOCK_M=32, BLOCK_N=16, BLOCK_K=16, direct=False)  # the GEMM path
    assert got.shape == expected.shape and got.is_contiguous()
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


# in channels a group, BLOCK_K: the reduction in chunks of the group's channels (20 = 16 + 4: the last chunk masked)
# or, for fewer channels than a chunk, taps x channels flattened (FLAT_K)
CHUNKS = {"chunks of 16, the last masked": (20, 16, False), "chunks of 8": (16, 8, False),
          "flattened: 3 channels": (3, 16, True), "flattened: 12 channels": (12, 16, True)}


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("case", CHUNKS)
def test_the_reduction_in_channel_chunks_or_flattened_in_either_input_layout(case, transposed, channels_last,
                                                                                monkeypatch):
    c_in, block_k, flat = CHUNKS[case]
    torch.manual_seed(0)
    x = torch.randn(2, c_in, 5, 7)  # odd sizes: every pixel tile masked
    weight = torch.randn(*((c_in, 3) if transposed else (3, c_in)), 3, 2)
    args = ((2, 1), (1, 0), (1, 2), transposed, (1, 0) if transposed else (0, 0), 1)
    launches = []
    kernel = conv.conv_nd_kernel

    class Recorded:
        def __getitem__(self, grid):
            def launch(*a, **k):
                launches.append(k)
                return kernel[grid](*a, **k)
            return launch

    monkeypatch.setattr(conv, "conv_nd_kernel", Recorded())
    got = conv_nd(x, weight, None, *args, BLOCK_M=16, BLOCK_N=8, BLOCK_K=block_k, CHANNELS_LAST=channels_last,
                  direct=False)
    torch.testing.assert_close(got, torch.convolution(x, weight, None, *args), atol=1e-4, rtol=1e-4)
    assert launches and {k["FLAT_K"] for k in launches} == {flat} and {k["BLOCK_K"] for k in launches} == {block_k}


def test_the_output_has_the_strides_inductors_code_reads_it_in():
    torch.manual_seed(0)
    x, weight = torch.randn(2, 3, 5, 5), torch.randn(3, 4, 3, 3)
    expected = torch.convolution(x, weight, None, (2, 2), (1, 1), (1, 1), True, (1, 1), 1)  # (2, 4, 10, 10)
    channels_last = (400, 1, 40, 4)
    got = conv_nd(x.to(memory_format=torch.channels_last), weight, None, (2, 2), (1, 1), (1, 1), True, (1, 1), 1,
                  out_stride=channels_last)
    assert got.stride() == channels_last
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


LIBRARY_CALL = ("def call(args):\n    buf2 = extern_kernels.convolution(buf0, buf1, arg1_1, stride=(2, 2), "
                "padding=(1, 1), dilation=(1, 1), transposed=True, output_padding=(1, 1), groups=2)\n"
                "    assert_size_stride(buf2, (2, 6, 10, 10), (600, 1, 60, 6), 'torch.ops.aten.convolution.default')\n")


def test_a_library_convolution_becomes_a_tunable_launch_of_kernelevos_convolution():
    body = ast.parse(LIBRARY_CALL).body[0].body
    convolutions = Convolutions(body, [1, 2, 4, 8], [1, 2, 3])
    launch = convolutions.launch("buf2", body[0].value)
    assert ast.unparse(launch) == (
        "conv_nd(buf0, buf1, arg1_1, (2, 2), (1, 1), (1, 1), True, (1, 1), 2, out_stride=(600, 1, 60, 6), "
        "BLOCK_M=C0_BLOCK_M, BLOCK_N=C0_BLOCK_N, BLOCK_K=C0_BLOCK_K, GROUP_M=C0_GROUP_M, num_warps=C0_NUM_WARPS, "
        "num_stages=C0_NUM_STAGES, CHANNELS_LAST=C0_CHANNELS_LAST, W_PHASES=C0_W_PHASES)")
    defaults = launcher_defaults()  # the launcher's own defaults, Inductor-style names
    launch_params = (*TILE_PARAMS, "CHANNELS_LAST", "W_PHASES")
    assert dict(convolutions.constants) == {f"C0_{p}": defaults[p] for p in launch_params}
    assert all(defaults[p] in convolutions.tunable[f"C0_{p}"] for p in launch_params)
    assert convolutions.tunable["C0_CHANNELS_LAST"] == [0, 1]  # the input's layout, the tuner's to choose
    assert convolutions.tunable["C0_W_PHASES"] == [0, 1]  # a transposed one's rows: split by phase or gathered
    assert convolutions.tunable["C0_NUM_WARPS"] == sorted({1, 2, 4, 8, defaults["NUM_WARPS"]})
    params = dict(convolutions.constants)  # a hardware profile's GEMM tiles apply to it as to a GEMM template's
    assert tile_starts(convolutions.tunable, params, [(128, 64, 32, 8, 8, 3)]) == [
        {**dict(zip([f"C0_{p}" for p in TILE_PARAMS], (128, 64, 32, 8, 8, 3))), "C0_CHANNELS_LAST": 0,
         "C0_W_PHASES": 1}]
    assert 'input_precision="tf32"' in kernel_source(tf32=True) and "tf32" not in kernel_source()
    bad = ast.parse("extern_kernels.convolution(buf0, buf1, arg1_1, stride=(1,), spin=3)", mode="eval").body
    with pytest.raises(SeedError, match=r"passes spin, which is not an argument of torch.convolution"):
        convolutions.launch("buf3", bad)
    with pytest.raises(SeedError, match=r"does not give torch.convolution's stride, padding, dilation"):
        convolutions.launch("buf3", ast.parse("extern_kernels.convolution(buf0, buf1)", mode="eval").body)


def test_a_library_convolution_kernelevos_cannot_take_is_named_in_one_line_with_why():
    captured = json.loads((FIXTURES / "layernorm.json").read_text())
    spec = resolve_problem(captured["fixture"]["problem"], sizes=captured["fixture"]["sizes"])
    call = "        buf9 = extern_kernels.convolution(buf0)\n"  # no weight, stride, ...: not torch.convolution's
    captured["code"] = captured["code"].replace("        return (", call + "        return (", 1)
    with pytest.raises(SeedError) as refused:
        seeds._checked_source(spec, captured, torch_compute_allowed=False)
    message = str(refused.value)
    assert "\n" not in message and "calls library kernels (torch.convolution)" in message
    assert message.endswith("kernelevo's Triton convolution could not take it: Inductor's extern_kernels."
                            "convolution(buf0) does not give torch.convolution's weight, stride, padding, dilation, "
                            "transposed, output_padding, groups as kernelevo's convolution needs them.")


CONV_ONLY = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, bias=False)

    def forward(self, x):
        return self.conv(x)

def get_inputs():
    return [torch.rand(2, 4, 7)]

def get_init_inputs():
    return []
'''
# what Inductor writes on a GPU for level1/75: the library call alone, no Triton kernel
LIBRARY_ONLY = ("def call(args):\n    arg0_1, arg1_1 = args\n    args.clear()\n"
                "    buf0 = extern_kernels.convolution(arg1_1, arg0_1, stride=(2,), padding=(1,), dilation=(2,), "
                "transposed=True, output_padding=(0,), groups=2, bias=None)\n"
                "    assert_size_stride(buf0, (2, 6, 15), (90, 15, 1), 'torch.ops.aten.convolution.default')\n"
                "    return (buf0, )\n")


@pytest.mark.parametrize("policy", ["triton", "kernelbench"])
def test_a_problem_whose_inductor_code_is_the_library_convolution_alone_gets_kernelevos(tmp_path, policy, sandbox):
    problem = tmp_path / "conv_only.py"
    problem.write_text(textwrap.dedent(CONV_ONLY))
    spec = resolve_problem(str(problem))
    captured = {"code": LIBRARY_ONLY, "args": [{"kind": "param", "name": "conv.weight"}, {"kind": "input", "index": 0}],
                "kernels": {}, "single_output": True, "device": "cpu"}
    with pytest.raises(SeedError, match="Inductor generated no Triton kernel for this problem"):
        convert(captured, problem.read_text(), spec.name)  # as before: no kernel to start from
    source = seeds._checked_source(spec, captured, torch_compute_allowed=policy == "kernelbench")
    assert seeds.library_calls(source) == [] and "out_stride=(90, 15, 1)" in source
    with make_evaluator(problem=str(problem), policy=policy, sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok" and result.guards["torch_compute_ops"] == [], result.reason


LEVEL1_57 = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """level1/57_conv_transposed_2D__square_input__square_kernel, at interpreter sizes, strided, padded, grouped."""
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 output_padding: int = 0, groups: int = 1, bias: bool = False):
        super(Model, self).__init__()
        self.conv_transpose2d = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                   padding=padding, output_padding=output_padding, groups=groups,
                                                   bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_transpose2d(x)

batch_size = 2
in_channels = 4
out_channels = 6
kernel_size = 3
height = 6
width = 6

def get_inputs():
    x = torch.rand(batch_size, in_channels, height, width)
    return [x]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, 2, 1, 1, 2, True]
'''

LEVEL2_3 = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """level2/3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU's form, at interpreter sizes (no pooling)."""
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.sum_weight = nn.Parameter(torch.tensor(sum_weight))
        self.gelu = nn.GELU()

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x + self.sum_weight
        return self.gelu(x)

batch_size = 2
in_channels = 3
out_channels = 4
depth, height, width = 3, 4, 4
kernel_size = (3, 3, 3)
stride = (2, 2, 2)
padding = (1, 1, 1)
output_padding = (1, 1, 1)
sum_weight = 1.0

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, sum_weight]
'''


@pytest.mark.slow
def test_kernelevo_seed_gives_a_transposed_convolution_alone_a_seed_that_policy_triton_judges_correct(tmp_path,
                                                                                                      monkeypatch,
                                                                                                      sandbox):
    problem = tmp_path / "57_conv_transposed_2D_tiny.py"
    problem.write_text(textwrap.dedent(LEVEL1_57))
    proc = kernelevo("seed", f"problem={problem}", f"out={tmp_path / 'seed.py'}", "inductor=none", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    source = (tmp_path / "seed.py").read_text()
    assert "conv_nd(" in source and seeds.library_calls(source) == []  # forward calls no torch compute
    assert {"C0_BLOCK_M", "C0_NUM_STAGES"} <= set(Genome.from_source(source).space)
    with make_evaluator(problem=str(problem), sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason
    assert result.guards["torch_compute_ops"] == []
    monkeypatch.setattr(seeds, "capture_variants", lambda *a, **k: pytest.fail("captured again: not cached"))
    assert 'input_precision="tf32"' in source  # policy triton allows TF32 dot products
    # torch compute allowed (policy kernelbench's), from the capture `kernelevo seed` cached (its spec; TF32): on the
    # CPU Inductor wrote Triton kernels around the convolution (layout copies), so the library's convolution stays
    spec = resolve_problem(str(problem), size_preset="test")
    library = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", default_cache_dir(), torch_compute_allowed=True,
                                  tf32=True)
    assert seeds.library_calls(library) == ["torch.convolution"] and "conv_nd" not in library


@pytest.mark.slow
def test_a_transposed_3d_convolution_keeps_inductors_pointwise_kernels_around_kernelevos_convolution(tmp_path, sandbox):
    problem = tmp_path / "3_ConvTranspose3d_Sum_GELU_tiny.py"
    problem.write_text(textwrap.dedent(LEVEL2_3))
    spec = resolve_problem(str(problem))
    source = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache")
    kernels = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    assert "conv_nd_kernel" in kernels and any(k.startswith("triton_") for k in kernels), kernels
    assert seeds.library_calls(source) == []
    with make_evaluator(problem=str(problem), sandbox=sandbox) as ev:
        result = ev.evaluate(source, label="inductor")
    assert result.status == "ok", result.reason
    library = seeds.inductor_seed(spec, "cpu", "cpu_interpreter", tmp_path / "cache", torch_compute_allowed=True)
    assert seeds.library_calls(library) == ["torch.convolution"]  # policy kernelbench: the library's, labelled
