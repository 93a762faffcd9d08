"""Level-2 convolutions with their elementwise epilogue fused (kernelevo/seeds/inductor/epilogues.py, conv_nd's
`epilogue`):
every path of kernelevo's convolution applies an epilogue to its tile before its one store (odd sizes: every mask);
Inductor's pointwise kernel after a convolution (captured on the CPU: tests/fixtures/inductor_cpu/, made by
experiments/inductor_fixtures.py --device cpu, among them one running in the convolution's channels-last order,
conv_mish; and the in-place form Inductor writes on a GPU) becomes the
convolution's epilogue, the seed correct against the reference with one launch fewer; a reduction, pooling, a second
reader of the output or a kernel reading other elements stays a kernel of its own."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE, PROBLEMS, make_evaluator
from fused_seeds import cpu_fixture, forward_calls, refused, run_seed, seed_pair
from kernelevo.core.genome import Genome
from fitness.problems.problem import resolve_problem
from kernelevo.seeds import inductor as seeds
from kernelevo.seeds.inductor.convert import convert
from kernelevo.seeds.inductor.settings import CaptureSettings
from kernelevo.seeds.kernels.conv import conv_nd

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="captured on and converted for Triton's interpreter")


@triton.jit
def bias_relu(acc, offset, mask, args):
    bias_ptr = args[0]
    plane = args[1]  # an output channel's elements (contiguous NCHW)
    channels = args[2]
    channel = (offset // plane) % channels
    return tl.maximum(acc + tl.load(bias_ptr + channel, mask), 0.0)


# in channels, out channels, kernel, stride, padding, groups, transposed, output padding: each path of conv_nd
PATHS = {
    "implicit GEMM": (5, 7, 3, 1, 1, 1, False, 0),
    "implicit GEMM, flattened reduction": (3, 18, 3, 2, 0, 1, False, 0),
    "direct": (1, 6, 3, 1, 0, 1, False, 0),
    "depthwise": (3, 6, 3, 1, 1, 3, False, 0),
    "transposed, one launch per phase": (4, 5, 3, 2, 1, 1, True, 1),
}


@pytest.mark.parametrize("case", PATHS.values(), ids=list(PATHS))
def test_every_path_of_kernelevos_convolution_applies_its_epilogue_before_its_one_store(case):
    c_in, c_out, kernel, stride, padding, groups, transposed, output_padding = case
    torch.manual_seed(0)
    x = torch.randn(2, c_in, 5, 7)
    weight = torch.randn(c_in, c_out // groups, kernel, kernel) if transposed else \
        torch.randn(c_out, c_in // groups, kernel, kernel)
    bias, extra = torch.randn(c_out), torch.randn(c_out)
    args = (x, weight, bias, (stride, stride), (padding, padding), (1, 1), transposed,
            (output_padding, output_padding), groups)
    plain = torch.convolution(*args)
    plane = plain.shape[2] * plain.shape[3]
    out = conv_nd(*args, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, epilogue=bias_relu, epilogue_args=(extra, plane, c_out))
    torch.testing.assert_close(out, torch.relu(plain + extra[:, None, None]), rtol=1e-4, atol=1e-4)


# the form Inductor writes on a GPU for conv_relu_bias.py (its sizes): the convolution's bias peeled off the library
# call and added, with ReLU and the second bias, by a 1D kernel in place on the convolution's buffer
GPU_FORM = """
triton_poi_fused_add_convolution_relu_0 = async_compile.triton('triton_poi_fused_add_convolution_relu_0', '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics

@triton_heuristics.pointwise(size_hints={'x': 2048}, filename=__file__, triton_meta={},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_poi_fused_add_convolution_relu_0'})
@triton.jit
def triton_poi_fused_add_convolution_relu_0(in_out_ptr0, in_ptr0, in_ptr1, xnumel, XBLOCK : tl.constexpr):
    xnumel = 1323
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x3 = xindex
    x1 = ((xindex // 63) % 7)
    tmp0 = tl.load(in_out_ptr0 + (x3), xmask)
    tmp1 = tl.load(in_ptr0 + (x1), xmask, eviction_policy='evict_last')
    tmp5 = tl.load(in_ptr1 + (x1), xmask, eviction_policy='evict_last')
    tmp2 = tmp0 + tmp1
    tmp3 = tl.full([1], 0, tl.int32)
    tmp4 = triton_helpers.maximum(tmp3, tmp2)
    tmp6 = tmp4 + tmp5
    tl.store(in_out_ptr0 + (x3), tmp6, xmask)
''', device_str='cuda')

def call(args):
    arg0_1, arg1_1, arg2_1, arg3_1 = args
    args.clear()
    assert_size_stride(arg2_1, (3, 5, 9, 11), (495, 99, 11, 1))
    buf0 = extern_kernels.convolution(arg2_1, arg0_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), """ \
    """transposed=False, output_padding=(0, 0), groups=1, bias=None)
    assert_size_stride(buf0, (3, 7, 7, 9), (441, 63, 9, 1))
    buf1 = buf0; del buf0  # reuse
    triton_poi_fused_add_convolution_relu_0.run(buf1, arg1_1, arg3_1, 1323, stream=stream0)
    return (buf1, )
"""


def _captured(name: str) -> tuple[dict, str]:
    """(a capture, its problem's path): a fixture captured on the CPU, or ``gpu_form`` (GPU_FORM)."""
    if name == "gpu_form":
        kernel = "triton_poi_fused_add_convolution_relu_0"
        return ({"code": GPU_FORM, "args": [{"kind": "param", "name": "conv.weight"},
                                            {"kind": "param", "name": "conv.bias"}, {"kind": "input", "index": 0},
                                            {"kind": "param", "name": "bias"}],
                 "kernels": {kernel: {"configs": [{"kwargs": {"XBLOCK": 256}, "num_warps": 4, "num_stages": 1}]}},
                 "single_output": True, "outputs": 1, "device": "cuda"}, str(PROBLEMS / "conv_relu_bias.py"))
    return cpu_fixture(name)


@pytest.mark.parametrize("name", ["conv_relu_bias", "convt_clamp_scale", "depthwise_tanh", "conv_mish", "gpu_form"])
def test_a_convolutions_pointwise_kernel_becomes_its_epilogue_correct_with_one_launch_fewer(name, tmp_path):
    captured, problem = _captured(name)
    plain, fused = seed_pair(captured, problem)
    epilogues = [n.name for n in ast.parse(fused).body if isinstance(n, ast.FunctionDef) and
                 n.name.endswith("_epilogue")]
    assert len(epilogues) == 1 and f"epilogue={epilogues[0]}" in fused
    kernel = epilogues[0].removesuffix("_epilogue")
    assert f"def {kernel}(" in plain and f"def {kernel}(" not in fused
    assert sum(c.startswith(f"{kernel}[") for c in forward_calls(plain)) == 1
    calls = forward_calls(fused)  # every input the epilogue reads is checked before the convolution launches
    first_conv = next(i for i, c in enumerate(calls) if c.startswith("conv_nd("))
    assert not any(c.startswith("check_input(") for c in calls[first_conv:]), calls
    assert not any(c.startswith(f"{kernel}[") for c in forward_calls(fused))
    space_plain, space_fused = Genome.from_source(plain).space, Genome.from_source(fused).space
    assert {"C0_BLOCK_M", "C0_BLOCK_N", "C0_NUM_WARPS"} <= set(space_fused)  # the convolution's still tuned
    assert set(space_plain) - set(space_fused) and all(k.startswith("K") for k in set(space_plain) - set(space_fused))
    out_plain, reference, launches_plain = run_seed(plain, problem, tmp_path, f"{name}_plain")
    out_fused, _, launches_fused = run_seed(fused, problem, tmp_path, f"{name}_fused")
    torch.testing.assert_close(out_plain, reference, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out_fused, reference, rtol=1e-4, atol=1e-4)
    assert out_fused.stride() == reference.stride()
    assert launches_fused == launches_plain - 1, (launches_plain, launches_fused)


def test_a_kernel_launched_after_two_convolutions_becomes_one_epilogue_of_both(tmp_path):
    captured, problem = _captured("gpu_form")
    second = ("    buf2 = extern_kernels.convolution(arg2_1, arg0_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), "
              "transposed=False, output_padding=(0, 0), groups=1, bias=None)\n"
              "    assert_size_stride(buf2, (3, 7, 7, 9), (441, 63, 9, 1))\n    buf3 = buf2; del buf2  # reuse\n"
              "    triton_poi_fused_add_convolution_relu_0.run(buf3, arg1_1, arg3_1, 1323, stream=stream0)\n"
              "    return (buf3, )\n")
    captured["code"] = captured["code"].replace("    return (buf1, )\n", second)  # the same layer twice
    plain, fused = seed_pair(captured, problem)
    epilogues = [n.name for n in ast.parse(fused).body if isinstance(n, ast.FunctionDef) and "_epilogue" in n.name]
    assert epilogues == ["triton_poi_fused_add_convolution_relu_0_epilogue"]
    assert [c.count(f"epilogue={epilogues[0]}") for c in forward_calls(fused) if c.startswith("conv_nd(")] == [1, 1]
    out_fused, reference, launches_fused = run_seed(fused, problem, tmp_path, "twice_fused")
    _, _, launches_plain = run_seed(plain, problem, tmp_path, "twice_plain")
    torch.testing.assert_close(out_fused, reference, rtol=1e-4, atol=1e-4)
    assert launches_fused == launches_plain - 2


def test_the_seed_of_policy_triton_is_fused_unless_the_setting_says_not():
    captured, problem = _captured("conv_relu_bias")
    spec = resolve_problem(problem)
    fused, plain = (seeds._checked_source(spec, captured, torch_compute_allowed=False, epilogues=fuse)
                    for fuse in (CaptureSettings().fuse_epilogues, False))
    assert "epilogue=triton_poi_fused_add_relu_2_epilogue" in fused and "_epilogue" not in plain
    library = seeds._checked_source(spec, captured, torch_compute_allowed=True)  # policy kernelbench: cuDNN's
    assert seeds.library_calls(library) == ["torch.convolution"] and "_epilogue" not in library


def test_a_reduction_after_a_convolution_stays_a_kernel_of_its_own(caplog):
    # conv_pool.py: the output's mean over each sample (a reduction, not over a pixel's channels: reductions.py) and
    # its max-pooling (other elements) both read it
    why = refused(*_captured("conv_pool"), caplog)
    assert len(why) == 1 and "triton_per_fused_mean_relu_2" in why[0] and "not a pixel's 5 channels" in why[0], why


def test_a_convolutions_output_read_again_after_its_pointwise_kernel_is_not_fused(caplog):
    captured, problem = _captured("conv_relu_bias")
    captured["code"] = captured["code"].replace("return (buf3, )", "return (buf3, buf2, )")  # a second reader
    why = refused(captured, problem, caplog)
    assert len(why) == 1 and "read again after it (several consumers)" in why[0], why


def test_a_pointwise_kernel_reading_other_elements_of_the_output_is_not_fused(caplog):
    captured, problem = _captured("gpu_form")
    captured["code"] = captured["code"].replace("tl.load(in_out_ptr0 + (x3), xmask)",
                                                "tl.load(in_out_ptr0 + (x3 + 1), xmask)")  # a neighbour's
    why = refused(captured, problem, caplog)
    assert len(why) == 1 and "at other elements than the one it computes" in why[0], why


@pytest.mark.slow
def test_a_fused_seed_passes_the_judge(sandbox):
    captured, problem = _captured("convt_clamp_scale")
    _, fused = seed_pair(captured, problem)
    with make_evaluator(problem=problem, sandbox=sandbox) as ev:
        result = ev.evaluate(fused, label="inductor")
    assert result.status == "ok", result.reason
    assert result.guards["torch_compute_ops"] == []


BUILD_FOR_H100 = """
import importlib.util, sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
loader = importlib.util.spec_from_file_location("fused_seed", sys.argv[1])
seed = importlib.util.module_from_spec(loader)
loader.loader.exec_module(seed)
kernel, epilogue = seed.conv_nd_kernel, getattr(seed, sys.argv[2])
constants = {"HAS_BIAS": False, "BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 8, "FLAT_K": False,
             "EPILOGUE": epilogue, "REDUCES": False}
signature = {n: "constexpr" if n in constants else "*fp32" if n.endswith("_ptr") else ("*fp32", "*fp32")
             if n == "ep_args" else "i32" for n in kernel.arg_names}
source = ASTSource(kernel, signature, {(kernel.arg_names.index(n),): v for n, v in constants.items()})
built = compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
print("built", len(built.asm["cubin"]))
"""


def test_the_fused_convolution_builds_for_an_h100_through_tritons_compiler(tmp_path):
    # the interpreter runs the epilogue as Python; Triton's compiler (no GPU needed) must take it as a constexpr
    # function argument with its arguments as a tuple, down to the cubin
    captured, problem = _captured("gpu_form")
    fused = convert(captured, Path(problem).read_text(), "conv_relu_bias", interpreter=False,
                    triton_convolutions=True, tf32=True)
    seed = tmp_path / "fused_seed.py"
    seed.write_text(fused)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    built = subprocess.run([sys.executable, "-c", BUILD_FOR_H100, str(seed),
                            "triton_poi_fused_add_convolution_relu_0_epilogue"], capture_output=True, text=True,
                           env={**env, "TRITON_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    assert built.returncode == 0 and built.stdout.startswith("built"), built.stderr[-2000:]
