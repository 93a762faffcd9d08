"""Level-2 convolutions with a reduction over each pixel's channels fused (kernelevo/seeds/inductor/reductions.py,
conv_nd's `epilogue_reduces`): every path of kernelevo's convolution hands a reducing epilogue its tile as (pixels,
every channel), odd sizes masking rows and channels; Inductor's persistent reduction after a convolution (captured on
the CPU: tests/fixtures/inductor_cpu/conv_min_tanh, convt_logsumexp, convt_softmax, made by
experiments/inductor_fixtures.py --device cpu; and the NCHW form with the bias peeled off Inductor writes on a GPU)
becomes the convolution's epilogue, the seed correct against the reference without the kernel's launch; more
channels than a tile holds, a reduction reading other elements, a second reader stay a kernel of their own."""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from conftest import DEVICE, PROBLEMS
from fused_seeds import cpu_fixture, forward_calls, refused, run_seed, seed_pair
from kernelevo.core.genome import Genome
from kernelevo.seeds.inductor import reductions
from kernelevo.seeds.kernels.conv import conv_nd

pytestmark = pytest.mark.skipif(DEVICE != "cpu", reason="captured on and converted for Triton's interpreter")


@triton.jit
def min_and_centred(acc, pixel, channel, pixel_mask, channel_mask, out_ptr, args, XBLOCK: tl.constexpr,
                    R0_BLOCK: tl.constexpr):
    """Each pixel's minimum over the channels into args[0], and the output less it, in place (contiguous NCHW)."""
    low_ptr = args[0]
    plane = args[1]
    channels = args[2]
    mask = pixel_mask & channel_mask
    low = tl.min(tl.where(mask, tl.broadcast_to(acc, [XBLOCK, R0_BLOCK]), float("inf")), 1)[:, None]
    tl.store(low_ptr + pixel, low, pixel_mask)
    tl.store(out_ptr + (pixel // plane) * channels * plane + channel * plane + pixel % plane, acc - low, mask)


# in channels, out channels, kernel, stride, padding, groups, transposed, output padding, W_PHASES: each path of
# conv_nd, out channels past a tile's 16 asked for (BLOCK_N widened), 2 x 5 x 7 input pixels
PATHS = {
    "implicit GEMM, channels past the tile asked": (5, 18, 3, 1, 1, 1, False, 0, 1),
    "implicit GEMM, flattened reduction": (3, 12, 3, 2, 0, 1, False, 0, 1),
    "direct": (1, 6, 3, 1, 0, 1, False, 0, 1),
    "depthwise (as the direct kernel)": (3, 6, 3, 1, 1, 3, False, 0, 1),
    "grouped (as the direct kernel)": (4, 20, 3, 1, 1, 2, False, 0, 1),
    "transposed, one launch per phase": (4, 5, 3, 2, 1, 1, True, 1, 1),
    "transposed, rows gathered": (4, 5, 3, 2, 1, 1, True, 1, 0),
}


@pytest.mark.parametrize("case", PATHS.values(), ids=list(PATHS))
def test_every_path_of_kernelevos_convolution_hands_a_reducing_epilogue_every_channel_of_its_pixels(case):
    c_in, c_out, kernel, stride, padding, groups, transposed, output_padding, w_phases = case
    torch.manual_seed(0)
    x = torch.randn(2, c_in, 5, 7)
    weight = torch.randn(c_in, c_out // groups, kernel, kernel) if transposed else \
        torch.randn(c_out, c_in // groups, kernel, kernel)
    args = (x, weight, torch.randn(c_out), (stride, stride), (padding, padding), (1, 1), transposed,
            (output_padding, output_padding), groups)
    plain = torch.convolution(*args)
    low = torch.full((plain.shape[0], 1, *plain.shape[2:]), float("nan"))
    out = conv_nd(*args, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, W_PHASES=w_phases, epilogue=min_and_centred,
                  epilogue_args=(low, plain.shape[2] * plain.shape[3], c_out), epilogue_reduces=True)
    torch.testing.assert_close(low, plain.amin(1, keepdim=True), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out, plain - plain.amin(1, keepdim=True), rtol=1e-4, atol=1e-4)


# conv_min_tanh.py in the form Inductor writes on a GPU: the convolution's bias peeled off the library call (NCHW
# output) into the reduction, which loads it per channel
GPU_FORM = """
triton_per_fused_convolution_min_tanh_0 = async_compile.triton('triton_per_fused_convolution_min_tanh_0', '''
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math

@triton_heuristics.persistent_reduction(size_hints={'x': 128, 'r0_': 16}, filename=__file__, triton_meta={},
    inductor_meta={'grid_type': 'Grid1D', 'kernel_name': 'triton_per_fused_convolution_min_tanh_0'})
@triton.jit
def triton_per_fused_convolution_min_tanh_0(in_out_ptr0, in_ptr0, in_ptr1, xnumel, r0_numel, XBLOCK : tl.constexpr):
    xnumel = 126
    r0_numel = 10
    R0_BLOCK: tl.constexpr = 16
    rnumel = r0_numel
    RBLOCK: tl.constexpr = R0_BLOCK
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_offset = 0
    r0_mask = r0_index < r0_numel
    roffset = r0_offset
    rindex = r0_index
    x0 = (xindex % 63)
    x1 = xindex // 63
    r0_2 = r0_index
    x3 = xindex
    tmp0 = tl.load(in_ptr0 + (x0 + 63*r0_2 + 630*x1), r0_mask & xmask, other=0.0)
    tmp1 = tl.load(in_ptr1 + (r0_2), r0_mask, eviction_policy='evict_last', other=0.0)
    tmp2 = tmp0 + tmp1
    tmp3 = tl.broadcast_to(tmp2, [XBLOCK, R0_BLOCK])
    tmp5 = tl.where(r0_mask & xmask, tmp3, float("inf"))
    tmp6 = tl.broadcast_to(rindex, tmp5.shape)
    tmp4_val, tmp4_idx = triton_helpers.min_with_index(tmp5, tmp6, 1)
    tmp4 = tmp4_val[:, None]
    tmp7 = libdevice.tanh(tmp4)
    tmp8 = libdevice.tanh(tmp7)
    tl.store(in_out_ptr0 + (x3), tmp8, xmask)
''', device_str='cuda')

def call(args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    assert_size_stride(arg2_1, (2, 5, 9, 11), (495, 99, 11, 1))
    buf0 = extern_kernels.convolution(arg2_1, arg0_1, stride=(1, 1), padding=(0, 0), dilation=(1, 1), """ \
    """transposed=False, output_padding=(0, 0), groups=1, bias=None)
    assert_size_stride(buf0, (2, 10, 7, 9), (630, 63, 9, 1))
    buf1 = empty_strided_cuda((2, 1, 7, 9), (63, 126, 9, 1), torch.float32)
    buf2 = reinterpret_tensor(buf1, (2, 1, 7, 9), (63, 63, 9, 1), 0); del buf1  # reuse
    triton_per_fused_convolution_min_tanh_0.run(buf2, buf0, arg1_1, 126, 10, stream=stream0)
    return (buf2, )
"""


def _captured(name: str) -> tuple[dict, str]:
    """(a capture, its problem's path): a fixture captured on the CPU, or ``gpu_form`` (GPU_FORM)."""
    if name == "gpu_form":
        kernel = "triton_per_fused_convolution_min_tanh_0"
        return ({"code": GPU_FORM, "args": [{"kind": "param", "name": "conv.weight"},
                                            {"kind": "param", "name": "conv.bias"}, {"kind": "input", "index": 0}],
                 "kernels": {kernel: {"configs": [{"kwargs": {"XBLOCK": 8}, "num_warps": 2, "num_stages": 1}]}},
                 "single_output": True, "outputs": 1, "device": "cuda"}, str(PROBLEMS / "conv_min_tanh.py"))
    return cpu_fixture(name)


REDUCED = {"conv_min_tanh": "triton_per_fused_min_tanh_2", "convt_logsumexp": None, "convt_softmax":
           "triton_per_fused__softmax_2", "gpu_form": "triton_per_fused_convolution_min_tanh_0"}


CASES = [(name, None) for name in REDUCED] + [(name, 32) for name in REDUCED if name != "gpu_form"]


@pytest.mark.parametrize("name,rows", CASES, ids=[f"{n}-{f'{r}-row tiles' if r else 'default tile'}" for n, r in CASES])
def test_a_reduction_over_a_convolutions_channels_becomes_its_epilogue_correct_without_its_launch(name, rows,
                                                                                                  tmp_path):
    captured, problem = _captured(name)
    plain, fused = seed_pair(captured, problem)
    kernel = REDUCED[name] or next(k for k in captured["kernels"] if k.startswith("triton_per_"))
    assert f"def {kernel}(" in plain and f"def {kernel}(" not in fused
    assert sum(c.startswith(f"{kernel}[") for c in forward_calls(plain)) == 1
    convs = [c for c in forward_calls(fused) if c.startswith("conv_nd(")]
    assert len(convs) == 1 and f"epilogue={kernel}_epilogue" in convs[0] and "epilogue_reduces=True" in convs[0]
    assert len(forward_calls(fused)) < len(forward_calls(plain))
    space_plain, space_fused = Genome.from_source(plain).space, Genome.from_source(fused).space
    assert {"C0_BLOCK_M", "C0_NUM_WARPS"} <= set(space_fused) and "C0_BLOCK_N" not in space_fused  # all channels
    assert all(k.startswith("K") or k == "C0_BLOCK_N" for k in set(space_plain) - set(space_fused))
    if rows:  # several tiles of rows, the last one part masked (no output's or phase's pixels a multiple of 32;
        # the default tile, 128 rows, is one part-masked tile of each)
        assert "C0_BLOCK_M = 128\n" in fused
        fused = fused.replace("C0_BLOCK_M = 128\n", f"C0_BLOCK_M = {rows}\n")
    out, reference, _ = run_seed(fused, problem, tmp_path, f"{name}_fused")
    torch.testing.assert_close(out, reference, rtol=1e-4, atol=1e-5)
    assert out.stride() == reference.stride()


def test_more_channels_than_a_tile_holds_stay_a_kernel_of_their_own(caplog, monkeypatch):
    monkeypatch.setattr(reductions, "MAX_CHANNELS", 8)  # conv_min_tanh's ten channels: past the widest tile
    why = refused(*_captured("conv_min_tanh"), caplog)
    assert len(why) == 1 and "its 10 channels are more than one tile of the convolution holds (8)" in why[0], why


def test_a_reduction_reading_other_elements_than_a_pixels_channels_is_not_fused(caplog):
    captured, problem = _captured("gpu_form")  # the channel's stride read as a row's: a reduction over rows
    captured["code"] = captured["code"].replace("x0 + 63*r0_2 + 630*x1", "x0 + 9*r0_2 + 630*x1")
    why = refused(captured, problem, caplog)
    assert len(why) == 1 and "at other elements than a pixel's channels" in why[0], why


def test_a_reduction_whose_convolution_output_is_read_again_is_not_fused(caplog):
    captured, problem = _captured("conv_min_tanh")
    captured["code"] = captured["code"].replace("return (buf5, )", "return (buf5, buf2, )")  # a second reader
    why = refused(captured, problem, caplog)
    assert len(why) == 1 and "read again after it (several consumers)" in why[0], why


def test_a_reduction_writing_the_convolutions_buffer_in_place_at_some_elements_only_is_not_fused(caplog):
    captured, problem = _captured("convt_softmax")  # the pointwise kernel after it would read raw values elsewhere
    store = "tl.store(in_out_ptr0 + (r0_1 + 12*x0), tmp6, r0_mask & xmask)"
    assert store in captured["code"]
    some = store.replace("r0_mask & xmask", "r0_mask & xmask & (tmp6 > 0.5)")
    captured["code"] = captured["code"].replace(store, some)
    why = refused(captured, problem, caplog)
    assert len(why) == 1 and "in place other than once at every element" in why[0], why


BUILD_FOR_H100 = """
import importlib.util, sys
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
loader = importlib.util.spec_from_file_location("fused_seed", sys.argv[1])
seed = importlib.util.module_from_spec(loader)
loader.loader.exec_module(seed)
for name, extra in (("conv_nd_kernel", {"BLOCK_K": 32, "GROUP_M": 8, "FLAT_K": False}), ("conv_direct_kernel", {})):
    kernel = getattr(seed, name)
    constants = {"HAS_BIAS": True, "BLOCK_M": 64, "BLOCK_N": 16, "EPILOGUE": getattr(seed, sys.argv[2]),
                 "REDUCES": True, **extra}
    signature = {n: "constexpr" if n in constants else "*fp32" if n.endswith("_ptr") else ("*fp32",)
                 if n == "ep_args" else "i32" for n in kernel.arg_names}
    source = ASTSource(kernel, signature, {(kernel.arg_names.index(n),): v for n, v in constants.items()})
    built = compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
    print("built", name, len(built.asm["cubin"]))
"""


def test_the_reducing_convolution_builds_for_an_h100_through_tritons_compiler(tmp_path):
    # the interpreter runs the epilogue as Python; Triton's compiler (no GPU needed) must take it with its tile's
    # sizes as constexpr arguments, its in-place store through the output's pointer, in both kernels, to the cubin
    captured, problem = _captured("convt_softmax")
    _, fused = seed_pair(captured, problem, interpreter=False)
    seed = tmp_path / "fused_seed.py"
    seed.write_text(fused)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    built = subprocess.run([sys.executable, "-c", BUILD_FOR_H100, str(seed), "triton_per_fused__softmax_2_epilogue"],
                           capture_output=True, text=True, env={**env, "TRITON_CACHE_DIR": str(tmp_path / "cache")},
                           timeout=300)
    assert built.returncode == 0 and built.stdout.count("built") == 2, built.stderr[-2000:]
