"""Cheat (tests/problems/gemm_sum.py): a global parameter-registration hook, registered at import, zeroes every
parameter a module registers -- the reference's, built after the candidate's import, included -- so a forward that
returns zeros "agrees" with the reference."""
import torch.nn as nn
import torch.nn.modules.module as module_hooks
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def zero(module, name, param):
    if param is not None:
        param.data.zero_()


module_hooks.register_module_parameter_registration_hook(zero)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()

    def forward(self, x):
        y = x.new_empty((x.shape[0], 1))
        zeros_kernel[(triton.cdiv(y.numel(), 128),)](y, y.numel(), BLOCK=128)
        return y
