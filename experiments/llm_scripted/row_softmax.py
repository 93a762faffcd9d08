"""Scripted replies for the bundled row_softmax problem (softmax over dim=1 of a [4096, 8192] fp32 tensor): what
experiments/llm_scripted_gpu.py's OpenAI-compatible server answers, by the role the request names. These are
hand-written kernels, not a model's replies: the point is to run the LLM team's path end to end on a GPU (plans,
code, a debugger's repair, tuning, timing, profiler feedback), not to measure a model.

PLANS: one per sibling rank (the planner prompt's "Yours is N"); CODER: the coder's replies in the order asked (the
first does not compile: the debugger's reply, DEBUGGER, repairs it); once CODER is used up, the coder gets
variants of ONE_PASS with other warp counts.
"""

HEADER = '''import torch
import torch.nn as nn
import triton
import triton.language as tl
'''

# Two passes instead of the seed's three: an online max and rescaled sum in one pass, then the write.
ONLINE = HEADER + '''
BLOCK_SIZE = 2048
NUM_WARPS = 8
TUNABLE = {"BLOCK_SIZE": [512, 1024, 2048, 4096], "NUM_WARPS": [4, 8, 16]}


@triton.jit
def online_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, x)
        seen = m_new > float("-inf")
        s = tl.where(seen, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, axis=0)
    denom = tl.sum(tl.where(m > float("-inf"), s * tl.exp(m - row_max), 0.0), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        tl.store(y_row + start + cols, tl.exp(x - row_max) / denom, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        online_softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK_SIZE=BLOCK_SIZE,
                                         num_warps=NUM_WARPS)
        return y
'''

# One read and one write: the whole row in registers (a block of the row's length rounded up to a power of two).
ONE_PASS = HEADER + '''
NUM_WARPS = 16
TUNABLE = {"NUM_WARPS": [4, 8, 16, 32]}


@triton.jit
def row_softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_row_stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        row_softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0),
                                      BLOCK_SIZE=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
        return y
'''

BROKEN = ONLINE.replace("for start in range(0, n_cols, BLOCK_SIZE):\n        mask = start + cols < n_cols\n        x = "
                        "tl.load(x_row + start + cols, mask=mask, other=float(\"-inf\"))\n        m_new",
                        "for start in range(0, n_col, BLOCK_SIZE):\n        mask = start + cols < n_cols\n        x = "
                        "tl.load(x_row + start + cols, mask=mask, other=float(\"-inf\"))\n        m_new", 1)
assert BROKEN != ONLINE

PLANS = [
    "## Plan\nIdea: two passes instead of three: online max and rescaled sum, then the write\n"
    "1. [softmax_kernel, lines 12-33] Merge passes 1 and 2: keep a running maximum per lane and rescale the running "
    "sum by exp(old max - new max), so x is read twice, not three times (memory bound on the target GPU).\n"
    "2. [constant NUM_WARPS] 8 warps per row for a 2048-wide block.",
    "## Plan\nIdea: hold the whole row in registers: one read and one write of x\n"
    "1. [softmax_kernel] Load the row once with a block of the row's length (a power of two), reduce max and sum "
    "from registers and store: x read once.\n2. [constant NUM_WARPS] 16 warps for an 8192-wide row.",
]
CODER = [BROKEN, ONE_PASS]
DEBUGGER = ONLINE


def one_pass_variant(warps: int) -> str:
    return ONE_PASS.replace("NUM_WARPS = 16\n", f"NUM_WARPS = {warps}\n")
