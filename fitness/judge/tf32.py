"""TF32 emulated on any device, for the coverage trial (``fitness.judge.coverage``): the reference at a TF32
policy's own precision, with every matmul's fp32 operands rounded to TF32's 10 mantissa bits as a TF32 matmul
rounds them. Owns the rounding and the emulated reference; imports torch and fitness.comparison only.

A deep network needs the rounding at every matmul, not at the inputs and weights alone: on level3/3 (DeepNarrowMLP,
17 Linear layers) the coverage trial raised one input element to 5.7e8, the first layer made activations of about
1e7, and a TF32 kernel rounds those again as the next layer's operand. Rounding only the inputs and weights agreed
with the fp32 reference where Inductor's TF32 seed did not, and the trial rejected that honest kernel
(docs/measurements.md); a 16-layer MLP on the CPU reproduces it (tests/fitness/test_coverage_tf32.py).
"""
from __future__ import annotations

import copy
import itertools

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fitness.comparison.correctness import as_tensor_list

TF32_MODES = ("nearest", "toward zero")  # how a TF32 matmul may round its fp32 operands: cuBLAS converts to
# nearest; a Triton dot on Hopper reads the fp32 bits and drops the low 13 (a row may split where only the
# truncated weights tie: docs/measurements.md)

# torch's matmul-like functions and the positions of their operands (a bias or an accumulator added in fp32 is not)
MATMUL_OPERANDS = {
    F.linear: (0, 1), F.bilinear: (0, 1, 2), torch.matmul: (0, 1), torch.Tensor.matmul: (0, 1),
    torch.Tensor.__matmul__: (0, 1), torch.Tensor.__rmatmul__: (0, 1), torch.mm: (0, 1), torch.Tensor.mm: (0, 1),
    torch.bmm: (0, 1), torch.Tensor.bmm: (0, 1), torch.addmm: (1, 2), torch.Tensor.addmm: (1, 2),
    torch.baddbmm: (1, 2), torch.Tensor.baddbmm: (1, 2), torch.addbmm: (1, 2), torch.einsum: range(1, 64),
    F.conv1d: (0, 1), F.conv2d: (0, 1), F.conv3d: (0, 1), F.conv_transpose1d: (0, 1), F.conv_transpose2d: (0, 1),
    F.conv_transpose3d: (0, 1), F.scaled_dot_product_attention: (0, 1, 2),
}


def tf32_rounded(value, mode: str = "nearest"):
    """An fp32 tensor's values at TF32's 10 mantissa bits, rounded as `mode` (one of TF32_MODES) says, what a TF32
    matmul does to its operands (anything else as it is)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return value
    bits = value.detach().contiguous().view(torch.int32)
    return ((bits + 0x1000 if mode == "nearest" else bits) & -0x2000).view(torch.float32).view(value.shape)


class TF32Operands(TorchFunctionMode):
    """While active, every matmul-like call (``MATMUL_OPERANDS``) gets its fp32 operands rounded to TF32 (`mode`),
    and computes in fp32 from them: a TF32 matmul's rounding, wherever in the model it happens."""

    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def __torch_function__(self, func, types, args=(), kwargs=None):
        positions = MATMUL_OPERANDS.get(func)
        if positions is not None:
            args = tuple(tf32_rounded(a, self.mode) if i in positions else a for i, a in enumerate(args))
        return func(*args, **(kwargs or {}))


def no_reduced_reference(reference, inputs: list, policy) -> None:
    """The reference at the policy's precision is the fp32 one (a reference without matmuls): nothing to compute."""
    return None


class TF32Reference:
    """The reference's outputs at each precision the policy allows, called as `reduced(reference, inputs, policy)`:
    a list of output lists, one per precision (the coverage trial's amount must keep every one within the policy of
    the fp32 reference). Under a TF32 policy: the reference in fp32 with its inputs and weights rounded to TF32 and
    every matmul's operands rounded again where they are computed (``TF32Operands``), in each of TF32_MODES (a copy
    of the model per mode, made at the first call: one per coverage trial), which emulates a TF32 matmul the same way
    on any device and torch version; None where that is the fp32 reference itself (a policy without TF32). (torch's
    own TF32, tried first, and rounding to nearest alone, each missed such a kernel: docs/measurements.md.)"""

    def __init__(self):
        self.rounded = {}  # mode: the reference with its weights rounded to TF32 that way

    def _model(self, reference, mode: str):
        if mode not in self.rounded:
            model = copy.deepcopy(reference) if isinstance(reference, torch.nn.Module) else reference
            if isinstance(model, torch.nn.Module):
                with torch.no_grad():
                    for tensor in itertools.chain(model.parameters(), model.buffers()):
                        tensor.copy_(tf32_rounded(tensor, mode))
            self.rounded[mode] = model
        return self.rounded[mode]

    def __call__(self, reference, inputs: list, policy) -> list[list] | None:
        if not policy.tf32:
            return None
        outputs = []
        for mode in TF32_MODES:
            with torch.no_grad(), TF32Operands(mode):
                outputs.append(as_tensor_list(self._model(reference, mode)(*[tf32_rounded(x, mode) for x in inputs])))
        return outputs
