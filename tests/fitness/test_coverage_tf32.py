"""The coverage trial keeps an honest TF32 kernel of a deep network (fitness.judge.tf32). On 4 x H100 it rejected
level3/3 DeepNarrowMLP's TF32 seed: one input element raised to 5.7e8, the reference at TF32 emulated with only the
inputs and weights rounded agreed with the fp32 one, while the kernel rounds every layer's activations again as the
next matmul's operand. A 16-layer MLP reproduces it on the CPU: the candidate computes every Linear with operands
rounded the way a Triton dot on Hopper does (low 13 bits dropped)."""
import pytest
import torch
import torch.nn as nn

from fitness.comparison.policy import load_policy
from fitness.judge.coverage import USABLE, coverage_trial
from fitness.judge.tf32 import TF32Operands, TF32Reference, tf32_rounded

POLICY = load_policy("triton")


def deep_mlp(seed: int, depth: int = 16, width: int = 64) -> nn.Module:
    torch.manual_seed(seed)
    layers, size = [], 512
    for _ in range(depth):
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    return nn.Sequential(*layers, nn.Linear(size, 256)).eval()


@pytest.mark.parametrize("seed", [0, 1])
def test_an_honest_tf32_kernel_of_a_deep_mlp_passes_and_its_input_is_still_covered(seed):
    model = deep_mlp(seed)
    x = torch.rand(16, 512, generator=torch.Generator().manual_seed(seed))

    def tf32_kernel(buffers, saved, where, name=None):  # every Linear on TF32 operands, accumulated in fp32
        with torch.no_grad(), TF32Operands("toward zero"):
            return model(*buffers)

    found = coverage_trial(model, tf32_kernel, [x.clone()], None, ["x"], POLICY, torch.Generator().manual_seed(seed),
                           lambda buffers: [b.clone() for b in buffers], None, TF32Reference())
    assert "failure" not in found, found["failure"]
    assert found["inputs"]["x"] >= USABLE and found["not_covered"] == []  # covered, at an amount TF32 can follow


def test_tf32_operands_round_every_matmul_but_not_a_bias():
    w, x, b = torch.randn(8, 8), torch.randn(4, 8), torch.randn(8)
    with TF32Operands("nearest"):
        got = torch.nn.functional.linear(x, w, b)
        via_matmul = x @ w.T + b
    expected = tf32_rounded(x) @ tf32_rounded(w).T + b  # the bias added in fp32, as a kernel's epilogue does
    assert torch.equal(got, expected) and torch.allclose(via_matmul, expected)
    assert not torch.equal(expected, x @ w.T + b)  # the rounding shows at these values
