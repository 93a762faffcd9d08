"""The sizes a problem file runs at on Triton's CPU interpreter: one stated shrink rule for any KernelBench file.

The interpreter runs a kernel thousands of times slower than a GPU: at KernelBench's sizes (a softmax over
4096 x 393216) every evaluation would time out. So, on the interpreter, a file's sizes are shrunk by this rule
(``shrink_sizes``; bundled problems use their hand-picked ``test_sizes`` from ``fitness/suite/suite.yaml``):

* the *size constants* are the file's module-level integers of at least ``MIN_SHRINKABLE`` (batch sizes, dims,
  channels), and such elements of its module-level lists and tuples of sizes (level3/1_MLP's ``layer_sizes``,
  ``input_shape = (32768,)``); smaller ones (kernel sizes, strides, paddings, axes) are never changed, nor are
  those the user set (``problem.sizes.NAME=N``);
* the bound: the largest tensor among the inputs, the model's parameters and buffers, and the outputs holds at most
  ``MAX_ELEMENTS`` elements (about the bundled problems' test sizes), measured on torch's meta device (nothing is
  allocated, no kernel runs; a recurrent layer answers with its output shapes instead of its steps);
* while the largest tensor is over the bound, the largest size constant (ties: by name) is halved; one whose halving
  makes the problem fail to build or run on the meta device is halved with one other constant of the same value,
  then with all of them (``bias_shape = (out_channels, 1, 1)``), and else keeps its value and is not tried again;
  a size the file writes as another constant's name (level1/95's ``input_shape = (num_classes,)``) is halved with
  that constant, never alone: halved apart, level1/95's targets fell outside its classes; and a size that must stay
  a multiple of a smaller constant (level2/75's ``out_features`` of ``num_groups``: the problem builds with one more
  group's worth of features, not with half a group's) is halved with it while that one can halve, so the quotient
  stays: halved apart, level2/75's groups became one feature each, where its output is the bias alone.

A second set of interpreter sizes (``other_sizes``), for judging whether a kernel reads its sizes from its inputs or
has the test sizes baked in (as kernels converted from torch.compile's capture at those sizes do), differs from the
test sizes in every size constant: those the test sizes set and the file's other integers of at least
``MIN_SHRINKABLE`` (of a list or tuple of sizes, each such element). Each moves to about three quarters of its
value (at least one less; 1 and 2 gain one), so the interpreter's work stays about that of the test sizes; a change
that makes the problem fail to build or run on the meta device is left out (all are tried together, then one at a
time by name). A third set (``other_sizes(..., odd=True)``) moves each to an odd value below that (``odd_value``),
so that no block size of a power of two divides it: a kernel whose masks assume one is found out there.
"""
from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kernelevo.core import pyast
from fitness.problems.problem_spec import LoadedProblem, size_constants

MAX_ELEMENTS = 16384  # elements of the largest tensor on the interpreter (bundled test sizes: 6k-13k)
MIN_SHRINKABLE = 16  # integer constants below this are kept (kernel sizes, strides, axes); halving stops at 8
MAX_STEPS = 256


@dataclass
class Shrunk:
    sizes: dict  # the constants changed by the rule and those the user set
    largest: int | None  # elements of the largest tensor at these sizes (None: could not be measured)
    full: dict = field(default_factory=dict)  # the changed constants' values in the file
    why_not: str = ""  # why the bound could not be reached, if it was not

    def describe(self) -> str:
        if self.largest is None:
            return f"not shrunk: {self.why_not}"
        full = ", ".join(f"{k}={v}" for k, v in self.full.items())
        where = "within" if self.largest <= MAX_ELEMENTS else "over"
        text = (f"shrunk for the interpreter: largest tensor {self.largest:,} elements, bound {MAX_ELEMENTS:,}; "
                f"the file's sizes: {full}" if full else
                f"the file's sizes: its largest tensor, {self.largest:,} elements, is {where} the interpreter's "
                f"bound of {MAX_ELEMENTS:,}")
        return text + (f"; {self.why_not}" if self.why_not else "")


@dataclass
class OtherSizes:
    sizes: dict  # the problem's sizes: the test sizes with the changed constants
    changed: dict  # name -> the other value, for each size constant that changed
    unchanged: list = field(default_factory=list)  # size constants whose change breaks the problem on the meta device
    why_not: str = ""  # why no other sizes could be made (nothing changed)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changed.items()) + (
            f" ({', '.join(self.unchanged)} unchanged: the problem does not build otherwise)" if self.unchanged else "")


def int_constants(module: ModuleType) -> dict[str, int]:
    """The problem's integer size constants (``fitness.problems.problem_spec.size_constants`` less floats): what the
    shrink rule may halve, and the sizes a start line shows."""
    return {k: v for k, v in size_constants(module).items() if type(v) is int}


def largest_tensor(problem: LoadedProblem, with_outputs: bool = True) -> int:
    """Elements of the largest input, parameter, buffer or (with_outputs) output, on the meta device."""
    import torch

    from fitness.comparison.correctness import as_tensor_list
    from fitness.problems.speed_of_light import meta_build

    model, inputs = meta_build(problem)
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.state_dict().values())
    if with_outputs:
        for layer in model.modules():
            if isinstance(layer, torch.nn.RNNBase):
                layer.forward = functools.partial(recurrent_shapes, layer)
        with torch.no_grad():
            tensors += as_tensor_list(model(*inputs))
    return max((t.numel() for t in tensors), default=0)


def recurrent_shapes(layer, x, hx=None):
    """What an ``nn.LSTM``, ``nn.GRU`` or ``nn.RNN`` returns, as empty meta tensors of its output shapes, with the
    shape checks its forward makes, without running it: on the meta device its forward runs every step of every
    layer operation by operation, which takes long (docs/measurements.md)."""
    import torch

    if not isinstance(x, torch.Tensor):  # a PackedSequence: the real forward
        return type(layer).forward(layer, x, hx)
    directions, out = 2 if layer.bidirectional else 1, layer.proj_size or layer.hidden_size
    if x.dim() not in (2, 3) or x.shape[-1] != layer.input_size:
        raise RuntimeError(f"input of shape {tuple(x.shape)} for a recurrent layer of input_size {layer.input_size}")
    batched = x.dim() == 3
    steps = x.shape[1] if batched and layer.batch_first else x.shape[0]
    batch = (x.shape[0] if layer.batch_first else x.shape[1],) if batched else ()
    states = {"h": (directions * layer.num_layers, *batch, out),
              "c": (directions * layer.num_layers, *batch, layer.hidden_size)}
    given = hx if isinstance(hx, tuple) else (hx,)
    for name, state in zip("hc", given):
        if state is not None and tuple(state.shape) != states[name]:
            raise RuntimeError(f"hidden state of shape {tuple(state.shape)}, expected {states[name]}")
    output = (*batch, steps, directions * out) if batched and layer.batch_first else (steps, *batch, directions * out)

    def empty(shape):
        return torch.empty(shape, dtype=x.dtype, device=x.device)

    if isinstance(layer, torch.nn.LSTM):
        return empty(output), (empty(states["h"]), empty(states["c"]))
    return empty(output), empty(states["h"])


def _slots(module: ModuleType) -> dict:
    """Every size the shrink rule may halve, by slot: the integer constants, and the integer elements of the list
    and tuple constants (level3/1_MLP's ``layer_sizes = [16384, 16384]``, level3/9's ``input_shape``)."""
    slots = {(k, None): v for k, v in int_constants(module).items()}
    for name, value in size_constants(module).items():
        if isinstance(value, (list, tuple)):
            slots.update({(name, i): x for i, x in enumerate(value) if type(x) is int})
    return slots


def _tied(module: ModuleType, slots: dict) -> dict:
    """{slot: the constant it is written as}: the slots whose value the file writes as another integer constant's
    name (level1/95's ``input_shape = (num_classes,)``). They were computed when the file was imported, so they
    follow that constant only when the rule sets them with it."""
    try:
        tree = pyast.parse(Path(module.__file__).read_text())
    except (OSError, TypeError, SyntaxError):  # no file to read: no ties known
        return {}
    tied = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        items = (list(enumerate(value.elts)) if isinstance(value, (ast.Tuple, ast.List)) else [(None, value)])
        for index, item in items:
            if isinstance(item, ast.Name) and (item.id, None) in slots and (name, index) in slots:
                tied[(name, index)] = item.id
    return tied


def _divisors(problem: LoadedProblem, slots: dict, shrinkable: set, with_outputs: bool) -> dict:
    """{slot: [integer constants it must stay a multiple of]}: a shrinkable slot A and a smaller integer constant B
    dividing it are tied when the problem builds with A + B but not with A + B / 2 (level2/75's out_features and
    num_groups: nn.GroupNorm needs whole groups). Halved apart, A reached B and every group held one feature, where a
    kernel writing the bias alone was exact (issue 63); halved together, the quotient (a group's size) stays."""
    def builds(slot, value) -> bool:
        return _builds(problem, with_outputs, {slot: value})

    tied = {}
    for a in sorted(shrinkable, key=str):
        for b in sorted(shrinkable, key=str):
            if b[1] is None and 1 < slots[b] < slots[a] and slots[a] % slots[b] == 0 \
                    and builds(a, slots[a] + slots[b]) and not builds(a, slots[a] + slots[b] // 2):
                tied.setdefault(a, []).append(b)
    return tied


def _builds(problem: LoadedProblem, with_outputs: bool, values: dict) -> bool:
    """Whether the problem's tensors build on torch's meta device with the slots of `values` set (``_set``); each
    slot is put back as it was after."""
    module = problem.module
    before = {(name, index): getattr(module, name) if index is None else getattr(module, name)[index]
              for name, index in values}
    _set(module, values)
    try:
        largest_tensor(problem, with_outputs)
        return True
    except Exception:  # noqa: BLE001 - these sizes do not make a problem
        return False
    finally:
        _set(module, before)


def _set(module: ModuleType, values: dict) -> None:
    """Each slot of `values` set on the module (a list or tuple constant made anew, of its own type)."""
    for (name, index), value in values.items():
        if index is None:
            setattr(module, name, value)
        else:
            items = list(getattr(module, name))
            items[index] = value
            setattr(module, name, type(getattr(module, name))(items))


def shrink_sizes(problem: LoadedProblem, fixed: dict) -> Shrunk:
    """The rule above, on a loaded problem whose user-set sizes (``fixed``) are already applied (its module's
    constants are changed in place). The rule's steps are on slots (``_slots``): an integer constant or an element
    of a list or tuple of sizes; a slot that cannot halve alone is tried together with each other slot of the same
    value, then with all of them (``bias_shape = (out_channels, 1, 1)`` follows ``out_channels``)."""
    module = problem.module
    slots, file_values = _slots(module), size_constants(module)
    try:
        largest, with_outputs = largest_tensor(problem), True
    except Exception:  # noqa: BLE001 - a forward the meta device cannot run: bound inputs and parameters only
        try:
            largest, with_outputs = largest_tensor(problem, with_outputs=False), False
        except Exception as exc:  # noqa: BLE001
            return Shrunk(dict(fixed), None, why_not=f"its tensors cannot be built on torch's meta device "
                                                     f"({type(exc).__name__}: {str(exc)[:200]})")
    follows = _tied(module, slots)  # slot -> the constant the file writes it as
    shrinkable = {k for k, v in slots.items() if v >= MIN_SHRINKABLE and k[0] not in fixed and k not in follows}
    current = dict(slots)
    divisors = _divisors(problem, slots, shrinkable, with_outputs)  # slot -> the slots it must be a multiple of

    def halve(group: list) -> int | None:
        """The largest tensor with the slots of `group`, those tied to them and their divisors that can still halve,
        halved (kept so), or None (restored) where it fails."""
        group = [*group, *(d for k in group for d in divisors.get(k, ())
                           if d in shrinkable and d not in group and current[k] % current[d] == 0)]
        group = [*group, *(k for k, name in follows.items()
                           if (name, None) in group and current[k] == current[name, None])]
        before = {k: current[k] for k in group}
        _set(module, {k: v // 2 for k, v in before.items()})
        try:
            measured = largest_tensor(problem, with_outputs)
        except Exception:  # noqa: BLE001 - these sizes do not make a problem
            _set(module, before)
            return None
        current.update({k: v // 2 for k, v in before.items()})
        return measured

    for _ in range(MAX_STEPS):
        if largest <= MAX_ELEMENTS or not shrinkable:
            break
        slot = max(sorted(shrinkable, key=str), key=lambda k: current[k])
        tied = sorted((k for k in shrinkable if current[k] == current[slot] and k != slot), key=str)
        # alone; else with one other slot of its value (by name), else with all of them; else not at all
        for group in ([slot], *([slot, k] for k in tied), *([[slot, *tied]] if len(tied) > 1 else [])):
            measured = halve(group)
            if measured is not None:
                break
        if measured is None:
            shrinkable.discard(slot)
            continue
        largest = measured
        shrinkable -= {k for k in shrinkable if current[k] < MIN_SHRINKABLE}
    names = sorted({name for (name, index), v in current.items() if v != slots[(name, index)]})
    after = size_constants(module)
    why_not = "" if largest <= MAX_ELEMENTS else "its other sizes are not module-level constants or cannot shrink"
    return Shrunk({**fixed, **{k: after[k] for k in names}}, largest, {k: file_values[k] for k in names}, why_not)


def other_value(value: int) -> int:
    """A size constant's value in the other sizes: about three quarters of it (at least one less); 1 and 2 gain one."""
    return value + 1 if value <= 2 else value - max(1, value // 4)


def odd_value(value: int) -> int:
    """A size constant's odd other value: the largest odd number below ``other_value`` (3, or 5 for a 3, where that
    is 1 or less)."""
    below = other_value(value) - 1
    below = below if below % 2 else below - 1
    return below if below > 2 else 5 if value == 3 else 3


def other_sizes(problem: LoadedProblem, odd: bool = False) -> OtherSizes:
    """The rule above, on a problem loaded at its test sizes (its module's constants are changed and restored);
    `odd`: each constant at its ``odd_value``."""
    module, spec = problem.module, problem.spec
    constants = size_constants(module)
    eligible = lambda name, x: type(x) is int and (name in spec.sizes or x >= MIN_SHRINKABLE)  # noqa: E731

    def moved(name: str, value):
        """The other value of a constant: an integer's, or a list's or tuple's with each eligible element moved."""
        if isinstance(value, (list, tuple)):
            return type(value)(move(x) if eligible(name, x) else x for x in value)
        return move(value)

    move = odd_value if odd else other_value

    names = sorted(k for k, v in constants.items()
                   if (any(eligible(k, x) for x in v) if isinstance(v, (list, tuple)) else eligible(k, v)))
    try:
        largest_tensor(problem)
        with_outputs = True
    except Exception:  # noqa: BLE001 - a forward the meta device cannot run: its inputs and parameters must build
        with_outputs = False

    def builds(values: dict) -> bool:  # whole constants by name
        return _builds(problem, with_outputs, {(name, None): value for name, value in values.items()})

    if not names:
        return OtherSizes(dict(spec.sizes), {}, why_not="the problem has no size constants to change")
    if not builds({}):
        return OtherSizes(dict(spec.sizes), {}, why_not="its tensors cannot be built on torch's meta device")
    wanted = {name: moved(name, constants[name]) for name in names}
    changed = wanted if builds(wanted) else {}
    if not changed:
        for name in names:
            if builds({**changed, name: wanted[name]}):
                changed[name] = wanted[name]
    unchanged = [name for name in names if name not in changed]
    why_not = "" if changed else "no size constant can change without breaking the problem on torch's meta device"
    return OtherSizes({**spec.sizes, **changed}, changed, unchanged, why_not)
