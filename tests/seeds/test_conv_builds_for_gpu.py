"""kernelevo's convolution kernels (kernelevo/seeds/kernels/conv.py) build for an H100 through Triton's compiler, down
to the
cubin, with their dots in TF32 as policy triton runs them: the interpreter runs a kernel as Python and cannot see
what the compiler refuses (a jit helper returning a tuple, a constexpr used as a value). No GPU needed. Here the
implicit GEMM's flattened reduction, the depthwise and the direct kernel; the tap-by-tap reduction is built with an
epilogue by tests/seeds/test_conv_epilogues.py."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

BUILD = """
import importlib.util, sys
from pathlib import Path
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource, compile
text = Path(sys.argv[1], "kernelevo", "seeds", "kernels", "conv.py").read_text()
tf32 = Path(sys.argv[2], "conv_tf32.py")
tf32.write_text(text.replace('input_precision="ieee"', 'input_precision="tf32"'))
loader = importlib.util.spec_from_file_location("conv_tf32", tf32)
conv = importlib.util.module_from_spec(loader)
loader.loader.exec_module(conv)
def build(kernel, constants, stages):
    constants = {**constants, "EPILOGUE": None, "ep_args": (),  # no epilogue: an empty tuple of its arguments
                 **({"REDUCES": False} if "REDUCES" in kernel.arg_names else {})}  # reducing: test_conv_reductions
    signature = {n: "constexpr" if n in constants else "*fp32" if n.endswith("_ptr") else "i32"
                 for n in kernel.arg_names}
    source = ASTSource(kernel, signature, {(kernel.arg_names.index(n),): v for n, v in constants.items()})
    return compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": stages})
build(conv.conv_nd_kernel, {"HAS_BIAS": True, "BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8,
                            "FLAT_K": True}, 3)  # FLAT_K=False: built with an epilogue by test_conv_epilogues.py
print("built conv_nd_kernel FLAT_K True")
build(conv.conv_depthwise_kernel, {"HAS_BIAS": True, "BLOCK_H": 8, "BLOCK_W": 128}, 1)
print("built conv_depthwise_kernel")
build(conv.conv_direct_kernel, {"HAS_BIAS": True, "BLOCK_M": 128, "BLOCK_N": 32}, 1)
print("built conv_direct_kernel")
"""


def test_every_convolution_kernel_builds_for_an_h100(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    built = subprocess.run([sys.executable, "-c", BUILD, str(REPO), str(tmp_path)], capture_output=True, text=True,
                           env={**env, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_HOME": str(tmp_path)},
                           timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.split("\n")[:3] == ["built conv_nd_kernel FLAT_K True", "built conv_depthwise_kernel",
                                            "built conv_direct_kernel"]
