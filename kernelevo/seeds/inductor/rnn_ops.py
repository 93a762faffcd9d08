"""nn.LSTM and nn.GRU made capturable: the capture process (``capture.py``) swaps each for a module that calls
kernelevo's recurrent operators, ``torch.ops.kernelevo.lstm`` and ``torch.ops.kernelevo.gru``.

Dynamo refuses nn.LSTM and nn.GRU ("Dynamo does not support RNN, GRU, or LSTM"), so a problem holding one had no
Inductor capture at all (KernelBench level3/35-42). Each is swapped, before the capture, for a ``RecurrentCall``
holding the very same parameters under the same names (``lstm.weight_ih_l0``: the seed binds them as the problem's
own module has them), whose forward does what nn.LSTM's / nn.GRU's does in inference (unbatched inputs, a missing
initial state as zeros) and calls one operator for the whole network. Inductor keeps such an operator as an opaque
call (``torch.ops.kernelevo.lstm.default(...)``) between its own kernels; the converter replaces that call by
kernelevo's Triton RNN (``recurrent.py``, ``kernelevo/seeds/kernels/rnn.py``). The operators compute with torch's own
RNN where they run (the capture's reference; on a GPU, the compiled model's one run), and say their outputs' shapes
and strides (torch's: a batch_first output is a transposed view) to the tracer.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

RECURRENT = (nn.LSTM, nn.GRU)


@torch.library.custom_op("kernelevo::lstm", mutates_args=())
def lstm(x: Tensor, hx: Tensor, cx: Tensor, weights: list[Tensor], has_biases: bool, num_layers: int,
         bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    out, h, c = torch._VF.lstm(x, (hx, cx), weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
    return _layout(out, batch_first), h.contiguous(), c.contiguous()


@torch.library.custom_op("kernelevo::gru", mutates_args=())
def gru(x: Tensor, hx: Tensor, weights: list[Tensor], has_biases: bool, num_layers: int, bidirectional: bool,
        batch_first: bool) -> tuple[Tensor, Tensor]:
    out, h = torch._VF.gru(x, hx, weights, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
    return _layout(out, batch_first), h.contiguous()


def _layout(out: Tensor, batch_first: bool) -> Tensor:
    """`out` in the layout the operators say they return (``_output``), whatever layout torch's RNN of this device
    chose: Inductor's code asserts it where the compiled model runs (the capture on a GPU)."""
    steps_first = out.transpose(0, 1) if batch_first else out
    return out if steps_first.is_contiguous() else \
        (steps_first.contiguous().transpose(0, 1) if batch_first else out.contiguous())


def _output(x: Tensor, hx: Tensor, bidirectional: bool, batch_first: bool) -> Tensor:
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    out = x.new_empty((steps, batch, (2 if bidirectional else 1) * hx.shape[2]))
    return out.transpose(0, 1) if batch_first else out


@lstm.register_fake
def _(x, hx, cx, weights, has_biases, num_layers, bidirectional, batch_first):
    return _output(x, hx, bidirectional, batch_first), hx.new_empty(hx.shape), cx.new_empty(cx.shape)


@gru.register_fake
def _(x, hx, weights, has_biases, num_layers, bidirectional, batch_first):
    return _output(x, hx, bidirectional, batch_first), hx.new_empty(hx.shape)


class RecurrentCall(nn.Module):
    """An nn.LSTM's or nn.GRU's parameters (the same tensors, the same names) and an inference forward through
    ``torch.ops.kernelevo.lstm`` / ``gru``."""

    def __init__(self, module: nn.LSTM | nn.GRU):
        super().__init__()
        self.is_lstm = isinstance(module, nn.LSTM)
        self.names = list(module._flat_weights_names)
        for name in self.names:
            self.register_parameter(name, getattr(module, name))
        self.bias, self.num_layers, self.hidden_size = module.bias, module.num_layers, module.hidden_size
        self.bidirectional, self.batch_first = module.bidirectional, module.batch_first

    def forward(self, x, hx=None):
        if isinstance(x, nn.utils.rnn.PackedSequence):
            raise TypeError("a PackedSequence input: kernelevo's Triton RNN takes padded tensors only")
        batched = x.dim() == 3
        if not batched:
            x = x.unsqueeze(0 if self.batch_first else 1)
        if hx is None:
            zeros = x.new_zeros((self.num_layers * (2 if self.bidirectional else 1), x.shape[0 if self.batch_first
                                                                                         else 1], self.hidden_size))
            hx = (zeros, zeros) if self.is_lstm else (zeros,)
        else:
            hx = tuple(hx) if self.is_lstm else (hx,)
            hx = hx if batched else tuple(h.unsqueeze(1) for h in hx)
        weights = [getattr(self, name) for name in self.names]
        args = (weights, self.bias, self.num_layers, self.bidirectional, self.batch_first)
        out, *state = (torch.ops.kernelevo.lstm if self.is_lstm else torch.ops.kernelevo.gru)(x, *hx, *args)
        if not batched:
            out, state = out.squeeze(0 if self.batch_first else 1), [h.squeeze(1) for h in state]
        return out, (tuple(state) if self.is_lstm else state[0])


def swap_recurrent(model: nn.Module) -> list[str]:
    """Every nn.LSTM and nn.GRU of `model` (exactly those classes) replaced in place by a ``RecurrentCall``; their
    names. RuntimeError, naming it, for one kernelevo's Triton RNN does not compute (an LSTM with proj_size)."""
    found = [(name, module) for name, module in model.named_modules() if type(module) in RECURRENT]
    for name, module in found:
        if getattr(module, "proj_size", 0):
            raise RuntimeError(f"{name} is an nn.LSTM with proj_size={module.proj_size}, which kernelevo's Triton "
                               f"RNN does not compute; this problem needs a hand-written seed")
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        if not child:
            raise RuntimeError("the problem's Model is itself an nn.LSTM or nn.GRU; this problem needs a "
                               "hand-written seed")
        setattr(parent, child, RecurrentCall(module))
    return [name for name, _ in found]
