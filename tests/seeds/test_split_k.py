"""The capture's split-K matmul (kernelevo/seeds/inductor/decompositions.py ``split_k``, on with Inductor's GEMM
templates:
template_choices.TEMPLATE_DECOMPOSITIONS): a matrix product whose K is long against M and N is a batched product
over K's parts and their sum, the same product; others are left to Inductor."""
import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelevo.seeds.inductor.cache import key_parts
from kernelevo.seeds.inductor.decompositions import SPLIT_K_MIN_PART, capture_decompositions, split_k, split_k_parts
from kernelevo.seeds.inductor.template_choices import TEMPLATE_DECOMPOSITIONS


def test_parts_give_every_sm_its_tiles_and_only_a_long_k_is_split():
    # KernelBench level1/6 on an H100 (132 SMs, two tiles each): 4 output tiles of 128 x 128, so 128 parts of 4,096
    assert split_k_parts(256, 256, 131072 * 4, 264) == 128
    assert split_k_parts(256, 256, 32 * 256 - 1, 264) == 1  # K under 32 x max(M, N)
    assert split_k_parts(4096, 4096, 4096, 264) == 1  # a square product
    assert split_k_parts(64, 64, 32 * 64 + 1, 1000) == 1  # long, but odd: no part divides it
    assert split_k_parts(64, 64, 2 * SPLIT_K_MIN_PART, 1000) == 2  # no part under SPLIT_K_MIN_PART
    assert split_k_parts(64, 64, 3 * 2 ** 13, 1000) == 16  # 16 parts of 1,536: 32 would be under SPLIT_K_MIN_PART


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_the_split_product_is_the_product(dtype):
    torch.manual_seed(0)
    a, b = torch.randn(5, 8192, dtype=dtype), torch.randn(8192, 3, dtype=dtype)
    got = split_k(a, b, waves=4)  # on the CPU one "SM": four parts of 2,048
    assert got is not NotImplemented and got.dtype == dtype and got.shape == (5, 3)
    expected = a.double() @ b.double()
    tol = 1e-10 if dtype == torch.float64 else 2.0  # fp16 inputs, summed in fp32, rounded to fp16 once
    torch.testing.assert_close(got.double(), expected, rtol=1e-2 if dtype == torch.float16 else 1e-12, atol=tol)


def test_the_traced_graph_is_a_batched_product_and_a_sum_only_where_split():
    ops = lambda graph: {str(n.target) for n in graph.graph.nodes if n.op == "call_function"}  # noqa: E731
    table = capture_decompositions(split_k_waves=4)
    long_k = make_fx(torch.mm, decomposition_table=table)(torch.randn(4, 8192), torch.randn(8192, 4))
    assert "aten.bmm.default" in ops(long_k) and "aten.mm.default" not in ops(long_k)
    square = make_fx(torch.mm, decomposition_table=table)(torch.randn(64, 64), torch.randn(64, 64))
    assert "aten.mm.default" in ops(square) and "aten.bmm.default" not in ops(square)
    plain = make_fx(torch.mm, decomposition_table=capture_decompositions())(torch.randn(4, 8192),
                                                                            torch.randn(8192, 4))
    assert "aten.bmm.default" not in ops(plain)  # without templates (policy kernelbench): Inductor's own


def test_a_capture_with_templates_keys_its_split_k(tmp_path):
    problem = tmp_path / "p.py"
    problem.write_text("import torch\n")

    class Spec:
        path, sizes = str(problem), {}
    with_templates = key_parts(Spec, "cuda:0", "h100_sxm", templates=True)
    assert with_templates["templates"]["decompositions"] == TEMPLATE_DECOMPOSITIONS
    assert key_parts(Spec, "cuda:0", "h100_sxm")["templates"] is False
