"""Hopper's TMA in candidates (issue 62): a kernel may use Triton's tensor descriptors, the host's
(``triton.tools.tensor_descriptor.TensorDescriptor``) and the device's (``tl.make_tensor_descriptor``, whose scratch
memory comes from the allocator the judge sets: fitness/judge/tma.py); setting Triton's allocator, or any other of
``triton.tools``, stays refused."""
import pytest

from conftest import make_evaluator
from fitness.judge.static_check import check_source

HEAD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl
'''
WRAPPER = '''

class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.empty_like(x)
        rows, cols = x.shape
        grid = (triton.cdiv(rows, 4), triton.cdiv(cols, 32))
        {launch}
        return y
'''
HOST = HEAD + '''from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def scale_shift(x_desc, y_desc, scale, BM: tl.constexpr, BN: tl.constexpr):
    at = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    y_desc.store(at, x_desc.load(at) * scale + 1.0)
''' + WRAPPER.format(launch="scale_shift[grid](TensorDescriptor.from_tensor(x, [4, 32]), "
                            "TensorDescriptor.from_tensor(y, [4, 32]), self.scale, BM=4, BN=32)")
DEVICE = HEAD + '''

@triton.jit
def scale_shift(x_ptr, y_ptr, rows, cols, scale, BM: tl.constexpr, BN: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[rows, cols], strides=[cols, 1], block_shape=[BM, BN])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[rows, cols], strides=[cols, 1], block_shape=[BM, BN])
    at = [tl.program_id(0) * BM, tl.program_id(1) * BN]
    y_desc.store(at, x_desc.load(at) * scale + 1.0)
''' + WRAPPER.format(launch="scale_shift[grid](x, y, rows, cols, self.scale, BM=4, BN=32)")


@pytest.mark.parametrize("source", [HOST, DEVICE], ids=["host descriptors", "device descriptors"])
def test_a_kernel_with_tensor_descriptors_passes_the_static_check_and_is_judged_correct(source, sandbox):
    assert check_source(source) == []
    with make_evaluator(sandbox=sandbox, trials=2) as ev:
        result = ev.evaluate(source)
    assert result.status == "ok", result.reason


@pytest.mark.parametrize("line, named", [
    ("triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8))",
     "'triton.set_allocator' is not allowed (allocator control"),
    ("import triton.tools.disasm", "'triton.tools.disasm'"),
    ("from triton.tools import tensor_descriptor", "'triton.tools'"),
    ("from triton.tools.tensor_descriptor import _private", "private API"),
])
def test_the_allocator_and_the_rest_of_triton_tools_stay_refused(line, named):
    findings = check_source(HOST + "\n" + line + "\n")
    assert any(named in f.message for f in findings), findings
