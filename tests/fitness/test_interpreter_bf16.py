"""bf16 on Triton's CPU interpreter (fitness/judge/interpreter_bf16.py): its tl.dot multiplied a bf16 operand's raw
bits as integers (issue 63) and its cast to bf16 truncated; the judge's workers compute both as a GPU does."""
import numpy as np
import pytest
import torch

from conftest import DEVICE, PROBLEMS, candidate, make_evaluator
from fitness.judge.interpreter_bf16 import install, to_bf16_bits


def test_fp32_to_bf16_rounds_to_the_nearest_even_as_torch_does():
    x = torch.cat([torch.randn(4096), torch.tensor([float("nan"), float("inf"), -float("inf"), 3.4e38, -0.0,
                                                    1e-40, 1.00390625, 1.01171875])])  # the last two: ties
    got = torch.from_numpy(to_bf16_bits(x.numpy()).view(np.int16)).view(torch.bfloat16)
    assert torch.equal(got[~x.isnan()], x.bfloat16()[~x.isnan()]) and bool(got[x.isnan()].isnan().all())


@pytest.mark.skipif(DEVICE != "cpu", reason="the interpreter's own dot: CPU only")
def test_a_bf16_dot_on_the_interpreter_is_the_fp32_product_of_its_operands():
    import triton
    import triton.language as tl

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        a = tl.load(a_ptr + r[:, None] * N + r[None, :])
        b = tl.load(b_ptr + r[:, None] * N + r[None, :])
        tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))

    assert install()
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c = torch.empty(16, 16)
    dot_kernel[(1,)](a, b, c, 16)
    torch.testing.assert_close(c, a.float() @ b.float())  # was ~1e10 off: the bits multiplied as integers


def test_an_honest_bf16_dot_kernel_passes_the_judge(sandbox):
    with make_evaluator(str(PROBLEMS / "bf16_matmul.py"), sandbox=sandbox) as ev:
        result = ev.evaluate(candidate("bf16_dot_matmul"))
    assert result.status == "ok", result.reason
