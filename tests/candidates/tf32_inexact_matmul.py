"""A matmul seed as Inductor's TF32 GEMM templates write it (ALLOW_TF32 a constexpr of the kernel, passed to
tl.dot): incorrect with TF32, correct with IEEE fp32 dot products. Triton's interpreter multiplies in fp32 whatever
allow_tf32 says, so under ALLOW_TF32 the kernel rounds A's tile to 4 mantissa bits first: a coarse stand-in for
TF32's rounding, which misses the tolerance as TF32 does on a long reduction on a GPU (level2/14)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 32
TUNABLE = {"BLOCK": [16, 32]}


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    ALLOW_TF32: tl.constexpr = True
    rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, 16):
        rk = k0 + tl.arange(0, 16)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        if ALLOW_TF32:
            a = (a.to(tl.int32, bitcast=True) & -524288).to(tl.float32, bitcast=True)
        acc += tl.dot(a, b, allow_tf32=ALLOW_TF32)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), dtype=torch.float32, device=A.device)
        _mm[(triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))](A, B, C, M, N, K, BLOCK=BLOCK)
        return C
