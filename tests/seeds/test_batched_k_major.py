"""A batched GEMM template (Inductor's bmm, also the split-K matmul's: kernelevo/seeds/inductor/decompositions.py) that
reads
an fp32 operand contiguous along M or N gets the K-major copy a TF32 dot needs on Hopper, as the plain GEMM template
does (kernelevo/seeds/inductor/templates.py ``k_major_strides``): its literal strides switch with ``<operand>_KMAJOR``,
the copy (``k_major``) runs batch by batch, and either way the product is right (Triton's interpreter)."""
import ast
import importlib.util
import sys

import pytest
import torch

from kernelevo.seeds.inductor.templates import K_MAJOR_COPY, k_major_loads

BATCH, M, N, K = 3, 20, 24, 40
# Inductor's triton_bmm.py.jinja as it renders for (BATCH, M, K) @ (BATCH, K, N), both contiguous, TF32 allowed
RENDERED = f'''
@triton.jit
def triton_tem_fused_bmm_0(arg_A, arg_B, out_ptr0, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    EVEN_K : tl.constexpr = False
    ALLOW_TF32 : tl.constexpr = True
    A = arg_A
    B = arg_B
    M = {M}
    N = {N}
    K = {K}
    BATCH = {BATCH}
    stride_aq = {M * K}
    stride_am = {K}
    stride_ak = 1
    stride_bq = {K * N}
    stride_bk = {N}
    stride_bn = 1
    pid = tl.program_id(0)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = min(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // (group_size)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ram = rm % M
    rbn = rn % N
    rk = tl.arange(0, BLOCK_K)
    idx_q = tl.program_id(1)
    A = A + (ram[:, None] * stride_am + rk[None, :] * stride_ak + idx_q*stride_aq)
    B = B + (rk[:, None] * stride_bk + rbn[None, :] * stride_bn + idx_q*stride_bq)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(K, 0, -BLOCK_K):
        a = tl.load(A, mask=rk[None, :] < k, other=0.)
        b = tl.load(B, mask=rk[:, None] < k, other=0.)
        acc += tl.dot(a, b, input_precision="ieee")
        A += BLOCK_K * stride_ak
        B += BLOCK_K * stride_bk
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    tl.store(out_ptr0 + (idx_n + N * idx_m + M * N * idx_q), acc, mask)
'''


def test_the_batched_templates_strided_operand_gets_a_k_major_switch():
    function = ast.parse(RENDERED).body[0]
    copies = k_major_loads(function, {"M": M, "N": N, "K": K})
    assert copies == {"arg_B": ("B_KMAJOR", K, N, BATCH)}  # A is read along K already
    body = ast.unparse(function)
    assert f"if B_KMAJOR:\n        stride_bk = 1\n    else:\n        stride_bk = {N}" in body
    assert f"if B_KMAJOR:\n        stride_bn = {K}\n    else:\n        stride_bn = 1" in body
    assert [a.arg for a in function.args.args][-1] == "B_KMAJOR"


def test_a_batch_too_large_for_the_copys_grid_or_a_broadcast_operand_is_left_as_it_is():
    broadcast = RENDERED.replace(f"stride_bq = {K * N}", "stride_bq = 0")
    assert k_major_loads(ast.parse(broadcast).body[0], {"M": M, "N": N, "K": K}) == {}
    huge = RENDERED.replace(f"BATCH = {BATCH}", "BATCH = 70000")
    assert k_major_loads(ast.parse(huge).body[0], {"M": M, "N": N, "K": K}) == {}


@pytest.mark.parametrize("k_major", [1, 0])
def test_either_way_the_batched_product_is_right(k_major, tmp_path):
    function = ast.parse(RENDERED).body[0]
    k_major_loads(function, {"M": M, "N": N, "K": K})
    module_file = tmp_path / "bmm_seed.py"
    module_file.write_text("import torch\nimport triton\nimport triton.language as tl\n\n"
                           + ast.unparse(function) + "\n\n" + K_MAJOR_COPY)
    spec = importlib.util.spec_from_file_location("bmm_seed", module_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bmm_seed"] = module
    try:
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        a, b = torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)
        out = torch.empty(BATCH, M, N)
        operand = module.k_major(b, K, N, BATCH) if k_major else b
        grid = (-(-M // 16) * -(-N // 16), BATCH, 1)
        module.triton_tem_fused_bmm_0[grid](a, operand, out, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=4,
                                            B_KMAJOR=k_major)
    finally:
        sys.modules.pop("bmm_seed", None)
    torch.testing.assert_close(out, torch.bmm(a, b), rtol=1e-4, atol=1e-4)
