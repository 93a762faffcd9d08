"""Which inputs and parameters a problem's output depends on, decided from the reference itself at small size.

The data floor of a problem (``fitness.problems.speed_of_light``) counts only what the output depends on: an input or a
parameter the reference ignores need not be read by any kernel. The decision is made by perturbation on the CPU at
the interpreter's test sizes (``fitness.problems.sizes``; one forward is microseconds there): for each of a few random
draws, each tensor input is replaced by the same tensor of another draw of ``get_inputs()`` (its own domain: integer
classes stay classes, ``rand`` stays positive) and each parameter or buffer gets random noise; the tensor counts
when any output element changes. A reference whose output changes between two identical calls (randomness in
``forward``) makes every tensor count. A tensor is counted whole: a part of an input the output ignores (a slice)
still counts, which only raises the floor.

One backward pass first: every forward argument, parameter and floating-point buffer with a nonzero gradient of a
random projection of the output is used (a nonzero derivative means some change of it changes the output; batch norm
in eval mode is written out so that its running statistics get one), so only the rest (integer inputs, tensors whose
gradient is zero here, or every tensor where autograd cannot take the forward) take a forward each: a network's
perturbation forward by forward is slow (docs/measurements.md). The gradient also shows a dependence below the
output's rounding, which no perturbation can: level3/19_MobileNetV1's activations shrink layer by layer until, at
its test sizes, its input and 47 of its tensors change no bit of the output; they count (the floor only rises).

Beyond the drawn distribution (issue 63): an input neither the gradient nor another draw shows used is probed scaled,
sign-flipped and shifted (``PROBES``); one that then moves the output counts, and is recorded with the probe that
showed it (`beyond`): the judge's probe trial (``fitness.judge.probes``) checks a candidate there, since its trials
cannot (KernelBench level2/9: ``relu(linear(x) - 2)`` is 0 for every ``torch.rand`` draw of x, so a kernel writing
zeros passed). A problem whose output no input moves under any probe is `degenerate` (a label on every verdict).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fitness.comparison.correctness import as_tensor_list, same_bits
from fitness.problems.problem import LoadedProblem, ProblemSpec, call_get_init_inputs, call_get_inputs, load_problem

DRAWS = 2  # random draws of the inputs; a tensor counts if it changes the output in any of them
# transforms of an input draw beyond its distribution, tried in this order: (name, f(x, mean magnitude of x))
PROBES = (("scaled by 10", lambda x, m: x * 10), ("sign-flipped", lambda x, m: -x),
          ("shifted by +4x its mean magnitude", lambda x, m: x + 4 * m),
          ("shifted by -4x its mean magnitude", lambda x, m: x - 4 * m))
MAX_ELEMENTS = 1 << 22  # a problem whose largest tensor at its test sizes is larger is not run here (16 MiB fp32)


@dataclass(frozen=True)
class Dependence:
    inputs: tuple  # one bool per forward argument: True when the output depends on it (non-tensors: False)
    ignored_parameters: tuple = ()  # state_dict names (parameters and buffers) the output does not depend on
    input_names: tuple = ()  # forward's argument names, for messages
    note: str = ""  # why the decision could not be made ("" when it was): then every tensor counts
    beyond: tuple = ()  # (index, probe name) of inputs that move the output only beyond the drawn distribution
    degenerate: bool = False  # no tensor input moves the output, even beyond the drawn distribution

    @property
    def ignored_inputs(self) -> list[str]:
        return [self.name(i) for i, used in enumerate(self.inputs) if not used]

    def name(self, index: int) -> str:
        return self.input_names[index] if index < len(self.input_names) else f"input {index}"

    def to_dict(self) -> dict:
        return {"inputs": list(self.inputs), "ignored_parameters": list(self.ignored_parameters),
                "input_names": list(self.input_names), "note": self.note,
                "beyond": [list(b) for b in self.beyond], "degenerate": self.degenerate}


def apply_probe(name: str, x: torch.Tensor) -> torch.Tensor:
    """Input `x` transformed by the probe `name` (``PROBES``)."""
    scale = float(x.detach().abs().to(torch.float64).mean()) if x.numel() else 0.0
    return dict(PROBES)[name](x, scale or 1.0)


def _probed(model, base: list, reference: list, indices: list) -> list:
    """(index, probe name) for each floating-point input of `base` at `indices` that some probe (``PROBES``) makes
    move the reference's output (a finite output that differs from `reference`); each input probed alone."""
    found = []
    for i in indices:
        value = base[i]
        if not (isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel()):
            continue
        for name, _ in PROBES:
            probed = list(base)
            probed[i] = apply_probe(name, value)
            outputs = _outputs(model, probed)
            finite = all(torch.isfinite(o).all() for o in outputs if isinstance(o, torch.Tensor)
                         and o.is_floating_point())
            if finite and _changed(reference, outputs):
                found.append((i, name))
                break
    return found


def _outputs(model, inputs) -> list:
    with torch.no_grad():
        return [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in as_tensor_list(model(*inputs))]


def _changed(a: list, b: list) -> bool:
    return len(a) != len(b) or any(
        not (same_bits(x, y) if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) else x == y)
        for x, y in zip(a, b))


def _draw(problem: LoadedProblem, seed: int) -> list:
    torch.manual_seed(seed)
    return call_get_inputs(problem)


def _differs(new: torch.Tensor, old: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """`new` (another draw of the same input), or where it equals `old` everywhere, `old` with noise."""
    if not same_bits(new, old):
        return new
    if new.is_floating_point():
        return old + torch.randn(old.shape, generator=generator).to(old.dtype) * (old.abs().mean() + 1)
    return new  # an integer input with a single possible value: no change possible


class _StatisticsWritten(TorchFunctionMode):
    """Batch norm in eval mode written out in differentiable operations, so that a gradient reaches its running
    statistics (torch's own batch norm has no derivative for them)."""

    NAMES = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        given = {**dict(zip(self.NAMES, args)), **(kwargs or {})}
        if func is not F.batch_norm or given.get("running_mean") is None or given.get("running_var") is None \
                or given.get("training"):
            return func(*args, **(kwargs or {}))
        x, weight, bias = given["input"], given.get("weight"), given.get("bias")
        shape = (1, -1) + (1,) * (x.dim() - 2)
        y = (x - given["running_mean"].view(shape)) * torch.rsqrt(given["running_var"].view(shape)
                                                                  + given.get("eps", 1e-5))
        y = y * weight.view(shape) if weight is not None else y
        return y + bias.view(shape) if bias is not None else y


def by_gradient(model, inputs: list, generator: torch.Generator) -> tuple[set, set]:
    """(indices of `inputs`, state_dict names) with a nonzero finite gradient of the output's projection on a
    random direction: the output certainly depends on them. Parameters and floating-point buffers, or where the
    forward cannot take a gradient for its buffers, parameters alone; nothing when autograd cannot take the forward
    at all (an operation without a derivative, no floating-point output, a projection that is not finite)."""
    state = dict(model.named_parameters(remove_duplicate=False))
    buffers = {name: b for name, b in model.named_buffers(remove_duplicate=False) if b.is_floating_point()}
    for tensors in ({**state, **buffers}, state):
        try:
            return _moved(model, inputs, {n: t for n, t in tensors.items() if t.is_floating_point()}, generator)
        except Exception:  # noqa: BLE001 - fewer tensors, else the perturbation decides alone
            continue
    return set(), set()


def _moved(model, inputs: list, tensors: dict, generator: torch.Generator) -> tuple[set, set]:
    """by_gradient for these `tensors` (parameters and buffers by name); raises when autograd cannot take it. The
    model's in-place operations (on its inputs too: each is a copy of its leaf) are allowed."""
    leaves = [x.detach().clone().requires_grad_() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
              for x in inputs]
    distinct = list({id(t): t for t in tensors.values()}.values())
    wanted = [x for x in leaves if isinstance(x, torch.Tensor) and x.requires_grad] + distinct
    was = [t.requires_grad for t in distinct]
    mutable = torch.autograd.graph.allow_mutation_on_saved_tensors
    try:
        with torch.enable_grad(), _StatisticsWritten(), mutable():
            for t in distinct:
                t.requires_grad_(True)
            given = [x.clone() if isinstance(x, torch.Tensor) and x.requires_grad else x for x in leaves]
            outputs = [o for o in as_tensor_list(model(*given))
                       if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad]
            projection = sum((o * torch.randn(o.shape, generator=generator).to(o.dtype)).sum() for o in outputs)
            if not outputs or not torch.isfinite(projection):
                return set(), set()
            grads = torch.autograd.grad(projection, wanted, allow_unused=True)
    finally:
        for t, before in zip(distinct, was):
            t.requires_grad_(before)
    moved = {id(t) for t, g in zip(wanted, grads) if g is not None and bool((torch.isfinite(g) & (g != 0)).any())}
    return ({i for i, x in enumerate(leaves) if id(x) in moved},
            {name for name, t in tensors.items() if id(t) in moved})


def find_dependence(problem: LoadedProblem, names: tuple = (), gradient: bool = True) -> Dependence:
    """The reference's dependence on each input and parameter, by one backward pass then perturbation on the CPU
    (module docstring; `gradient` False: by perturbation alone)."""
    torch.manual_seed(0)
    model = problem.Model(*call_get_init_inputs(problem)).eval()  # as the judge builds it (fitness.judge.candidate)
    generator = torch.Generator().manual_seed(1)
    used_inputs: list[bool] | None = None
    state = dict(model.state_dict())
    used_state = {name: False for name in state}
    for draw in range(DRAWS):
        base, other = _draw(problem, 1000 + draw), _draw(problem, 2000 + draw)
        used_inputs = used_inputs or [False] * len(base)
        reference = _outputs(model, base)
        if _changed(reference, _outputs(model, base)):
            return Dependence(tuple(isinstance(x, torch.Tensor) for x in base), (), names,
                              "the reference's output changes between identical calls: every tensor counts")
        if gradient and draw == 0:  # what the gradient shows used needs no forward of its own
            inputs_used, state_used = by_gradient(model, base, generator)
            used_inputs = [i in inputs_used for i in range(len(base))]
            used_state.update(dict.fromkeys(state_used & used_state.keys(), True))
        for i, value in enumerate(base):
            if isinstance(value, torch.Tensor) and not used_inputs[i]:
                swapped = list(base)
                swapped[i] = _differs(other[i], value, generator)
                used_inputs[i] = _changed(reference, _outputs(model, swapped))
        for name, tensor in state.items():
            if used_state[name] or not tensor.is_floating_point() or not tensor.numel():
                used_state[name] = used_state[name] or not tensor.is_floating_point()  # integers: count them
                continue
            saved = tensor.detach().clone()
            with torch.no_grad():
                tensor.add_(torch.randn(tensor.shape, generator=generator).to(tensor.dtype) * (saved.abs().mean() + 1))
                used_state[name] = _changed(reference, _outputs(model, base))
                tensor.copy_(saved)
    beyond = tuple(_probed(model, base, reference, [i for i, used in enumerate(used_inputs) if not used]))
    for i, _ in beyond:
        used_inputs[i] = True
    tensors = any(isinstance(x, torch.Tensor) for x in base)
    return Dependence(tuple(used_inputs or ()), tuple(n for n, used in used_state.items() if not used), names,
                      beyond=beyond, degenerate=tensors and not any(used_inputs))


def small_spec(spec: ProblemSpec) -> ProblemSpec:
    """The problem at the interpreter's test sizes (the spec itself when it is already at them)."""
    if spec.size_preset == "test":
        return spec
    from fitness.problems.problem import resolve_problem, suite_names

    return resolve_problem(spec.name if spec.name in suite_names() and spec.seed_path else spec.path,
                           size_preset="test")


_DECIDED: dict = {}  # (the test-size problem's file, text and sizes, forward's names) -> its Dependence, per process


def dependence_of(spec: ProblemSpec, names: tuple = ()) -> Dependence:
    """``find_dependence`` at the test sizes of `spec`; where the reference cannot be run there, every tensor counts
    (the note says why). Decided once per process for a problem file's text at its test sizes, whatever sizes `spec`
    has: a run's check at other sizes asks again for the same, and a many-step LSTM's takes long on the CPU."""
    from fitness.problems.sizes import largest_tensor

    key = None
    try:
        test_sizes = small_spec(spec)
        key = (test_sizes.path, Path(test_sizes.path).read_text(), repr(sorted(test_sizes.sizes.items())), names)
        if key in _DECIDED:
            return _DECIDED[key]
        small = load_problem(test_sizes)
        largest = largest_tensor(small)
        if largest > MAX_ELEMENTS:  # a shape the shrink rule cannot change (a tuple): too large for the CPU here
            decided = Dependence((), (), names, f"not decided: at its smallest sizes a tensor has {largest:,} "
                                                f"elements (over {MAX_ELEMENTS:,}); every tensor counts")
        else:
            decided = find_dependence(small, names)
    except Exception as exc:  # noqa: BLE001 - a reference the CPU cannot run at small size: no refinement
        decided = Dependence((), (), names, f"not decided ({type(exc).__name__}: {str(exc)[:160]}): every tensor "
                                            f"counts")
    if key is not None:
        _DECIDED[key] = decided
    return decided
