"""Inductor's persistent reduction over a convolution's channels, fused into kernelevo's convolution
(``kernelevo/seeds/kernels/conv.py``) as a reducing epilogue (``conv_nd``'s ``epilogue_reduces``).

After a level-2 convolution, a min, a logsumexp or a softmax over the channels (``torch.min(x, dim=1)``) is a
persistent reduction of Inductor's, ``triton_per_fused_min_tanh_2(out, conv, xnumel, r0_numel)``: a program's tile is
[XBLOCK pixels, R0_BLOCK channels] (``xindex`` numbers a pixel of the output, batch and spatial dimensions row-major;
``r0_index`` its channel), it loads the convolution's buffer at (pixel, channel), reduces along axis 1 and stores
per pixel (and, for a softmax, a whole tensor again). The implicit GEMM's tile is [BLOCK_M pixels, BLOCK_N output
channels]: where BLOCK_N covers every channel (``conv_nd`` makes it so: BLOCK_N the channels' next power of two,
at least 16), the tile is that kernel's tile, so the kernel's body runs as the convolution's epilogue: ``xindex``
bound to the tile's pixels, ``r0_index`` to its channels, the masks to the tile's, its loads of the convolution's
buffer replaced by the accumulator, and its own stores kept (the convolution stores nothing else, unless the kernel
wrote the buffer in place: then the epilogue writes it, ``out_ptr``). The kernel's launch goes, and with it a read of
the convolution's whole output.

Checked before it is used (``Refused`` with the reason otherwise): a persistent reduction (``triton_per_``, one
dimension reduced) over as many elements as the convolution has channels (at most ``MAX_CHANNELS``) and as many rows
as it has pixels, reading the convolution's buffer (and writing it, if in place) exactly at the tile's element
(evaluated on every element of a small output, else on 4096 drawn and the corners), reducing along its rows only,
each reduction's input masked to the channels (the tile may be wider than them), its outputs fresh buffers, the
convolution's output read by nothing after it unless the kernel rewrote it in place. A looped reduction
(``triton_red_``), a norm or pool over spatial dimensions, several readers stay kernels of their own.
"""
from __future__ import annotations

import ast
import copy
import math
import re

import torch

from kernelevo.core import pyast
from kernelevo.seeds.inductor.kernel_index import Refused, address, coordinates, evaluate, literal, names, offsets

MAX_CHANNELS = 256  # the widest tile of channels a reduction is fused for (BLOCK_M x this many fp32 accumulators)
NOTE = (" A persistent reduction Inductor ran over a convolution's channels is its epilogue too (conv_nd's "
        "epilogue_reduces: the tile holds every channel of its pixels; kernelevo/seeds/inductor/reductions.py).")
HEADER = {"xnumel", "r0_numel", "R0_BLOCK", "xoffset", "xindex", "xmask", "r0_index", "r0_mask"}  # rebound
INDEX = re.compile(r"(x\d+|r0_\d+)$")  # Inductor's index variables (x0 = xindex % 16, r0_1 = r0_index)
PRESET = {"rindex": "r", "r0_index": "r", "xindex": "x"}
REDUCING = {"tl.sum", "tl.max", "tl.min", "tl.argmax", "tl.argmin", "tl.reduce", "tl.xor_sum", "tl.prod",
            "triton_helpers.max2", "triton_helpers.min2", "triton_helpers.min_with_index",
            "triton_helpers.max_with_index", "triton_helpers.welford", "triton_helpers.any", "triton_helpers.prod"}
UNKNOWN = re.compile(r"(tl|triton_helpers|tl_math|libdevice)\.\w*(reduce|scan|cum|softmax|welford|sum|max|min|prod|"
                     r"any|arg|sort|histogram)\w*")  # reductions and scans REDUCING does not know
POINTWISE = {"triton_helpers.maximum", "triton_helpers.minimum", "tl.maximum", "tl.minimum"}  # named like them
SIGNATURE = "acc, pixel, channel, pixel_mask, channel_mask, out_ptr, args, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr"


def _axis(call: ast.Call):
    given = next((k.value for k in call.keywords if k.arg in ("axis", "dim")), None)
    return literal(given if given is not None else call.args[-1] if len(call.args) > 1 else None)


class ChannelReduction:
    """The persistent reduction `kernel` (its FunctionDef `source`, its converter's table entry `table`), launched by
    `call` on the convolution's output (`aliases`: its names) of sizes and strides `layout`, checked
    (``Refused``) and its epilogue made (``function``); ``passed``: the launch's arguments the epilogue takes,
    ``in_place``: whether it writes the convolution's buffer, ``outputs``: the buffers it writes."""

    def __init__(self, kernel: str, table: dict, source: ast.FunctionDef, call: ast.Call, aliases: set,
                 layout: tuple):
        if kernel.startswith("triton_red_"):
            raise Refused("a looped reduction (triton_red_: the reduced elements in chunks), not one a tile holds")
        runtime = table["runtime"]
        if not kernel.startswith("triton_per_") or table.get("grid_type", "Grid1D") != "Grid1D" or \
                len(call.args) != len(runtime):
            raise Refused("not a persistent reduction over one dimension launched on a 1D grid")
        self.kernel, self.source, self.layout = kernel, source, layout
        given = dict(zip(runtime, call.args))
        reads = [n for n, arg in given.items() if isinstance(arg, ast.Name) and arg.id in aliases]
        if len(reads) != 1 or any(names(arg) & aliases for n, arg in given.items() if n not in reads):
            raise Refused("it takes the convolution's output more than once")
        self.conv_arg = reads[0]
        self.numels = {n: literal(given[n]) for n in runtime if n.endswith("numel")}
        if set(self.numels) != {"xnumel", "r0_numel"} or any(type(v) is not int for v in self.numels.values()):
            raise Refused(f"it runs over {sorted(self.numels)}, not literal xnumel and r0_numel (one reduced "
                          f"dimension)")
        sizes, strides = layout
        channels, pixels = sizes[1], math.prod(sizes) // sizes[1]
        if self.numels["r0_numel"] != channels:
            raise Refused(f"it reduces {self.numels['r0_numel']} elements for each it writes, not a pixel's "
                          f"{channels} channels (a norm or a pool over other dimensions)")
        if self.numels["xnumel"] != pixels:
            raise Refused(f"it runs over {self.numels['xnumel']} rows, not the convolution's {pixels} pixels")
        if channels > MAX_CHANNELS:
            raise Refused(f"its {channels} channels are more than one tile of the convolution holds "
                          f"({MAX_CHANNELS})")
        self.passed = [n for n in runtime if n != self.conv_arg and n not in self.numels]
        self.args = [given[n] for n in self.passed]
        self.index = [s for s in source.body if isinstance(s, ast.Assign) and len(s.targets) == 1 and
                      isinstance(s.targets[0], ast.Name) and INDEX.match(s.targets[0].id)]
        self.depends = self._dependence()
        self.in_place = self._binding()
        self._check_body()
        self.outputs = [given[self._pointer(s)] for s in self._calls("tl.store") if self._pointer(s) != self.conv_arg]
        if not all(isinstance(o, ast.Name) for o in self.outputs):
            raise Refused("it writes a buffer that is not a name")
        self.function = self._epilogue()

    def _calls(self, *functions: str) -> list[ast.Call]:
        return [n for n in ast.walk(self.source) if isinstance(n, ast.Call) and ast.unparse(n.func) in functions]

    def _pointer(self, call: ast.Call) -> str:
        found = names(call.args[0]) & set(self.passed + [self.conv_arg]) if call.args else set()
        if len(found) != 1:
            raise Refused(f"it addresses memory as {ast.unparse(call.args[0]) if call.args else '?'}")
        return found.pop()

    def _dependence(self) -> dict[str, set]:
        """Each index variable's dependence on the pixel (``"x"``) and the channel (``"r"``)."""
        depends = {name: {kind} for name, kind in PRESET.items()}
        for statement in self.index:
            depends[statement.targets[0].id] = set().union(*(depends.get(n, set()) for n in names(statement.value)))
        return depends

    def _on(self, node: ast.AST) -> set:
        return set().union(*(self.depends.get(n, set()) for n in names(node)))

    def _check_body(self) -> None:
        kept = [s for s in self.source.body if not _header(s)]
        used = set().union(*(names(s) for s in kept))
        if used & {"xoffset"} or any(ast.unparse(n.func) in ("tl.program_id", "tl.arange") for s in kept
                                     for n in ast.walk(s) if isinstance(n, ast.Call)):
            raise Refused("its body depends on its own program's position (xoffset, tl.program_id, tl.arange)")
        if any(self.conv_arg in names(n) for n in ast.walk(self.source) if isinstance(n, ast.Call) and
               ast.unparse(n.func) not in ("tl.load", "tl.store")):
            raise Refused(f"it uses {self.conv_arg} other than by tl.load and tl.store")
        masked = {s.targets[0].id for s in kept if isinstance(s, ast.Assign) and len(s.targets) == 1 and
                  isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call) and
                  ast.unparse(s.value.func) == "tl.where" and s.value.args and "r0_mask" in names(s.value.args[0])}
        unknown = sorted(name for name in {ast.unparse(n.func) for n in ast.walk(self.source)
                                           if isinstance(n, ast.Call)} - REDUCING - POINTWISE
                         if UNKNOWN.fullmatch(name))
        if unknown:
            raise Refused(f"it calls {', '.join(unknown)}: a reduction or scan this fusion does not know")
        for call in self._calls(*REDUCING):
            if _axis(call) != 1:
                raise Refused(f"it reduces along another axis than its rows' ({ast.unparse(call)[:60]})")
            if not call.args or not isinstance(call.args[0], ast.Name) or call.args[0].id not in masked:
                raise Refused("a reduction's input is not masked to the channels (tl.where on r0_mask): the tile "
                              "may be wider than them")

    def _binding(self) -> bool:
        """Whether the kernel writes the convolution's buffer in place; Refused unless it reads (and writes) it
        exactly at the element (pixel, channel) of the tile, pixels numbered row-major over the batch and the
        spatial dimensions."""
        sizes, strides = self.layout
        coords = coordinates(sizes)
        at = offsets(sizes, strides, coords)
        pixel_sizes = [s for d, s in enumerate(sizes) if d != 1]
        pixel_strides = [math.prod(pixel_sizes[d + 1:]) for d in range(len(pixel_sizes))]
        pixel = (coords[:, [d for d in range(len(sizes)) if d != 1]] * torch.tensor(pixel_strides)).sum(1)
        env = {"xindex": pixel, "r0_index": coords[:, 1], "rindex": coords[:, 1], "r0_offset": 0, "roffset": 0}
        accesses = [c for c in self._calls("tl.load", "tl.store") if c.args and self.conv_arg in names(c.args[0])]
        why = ("it reads the convolution's output at other elements than a pixel's channels (a reduction over "
               "other dimensions, pooling)")
        try:
            for statement in self.index:
                env[statement.targets[0].id] = evaluate(statement.value, env)
            found = [evaluate(address(c, self.conv_arg), env) for c in accesses]
        except (KeyError, ZeroDivisionError):
            raise Refused(why) from None
        if not all(torch.equal(torch.as_tensor(f).expand_as(at), at) for f in found):
            raise Refused(why)
        stores = [c for c in accesses if ast.unparse(c.func) == "tl.store"]
        line = {id(c): i for i, s in enumerate(self.source.body) for c in ast.walk(s)}  # its statement's place
        if stores and (any(line[id(c)] > min(line[id(s)] for s in stores) for c in accesses if c not in stores) or
                       any(names(s.args[2] if len(s.args) > 2 else ast.Constant(None)) - {"xmask", "r0_mask"} or
                           s.keywords for s in stores)):  # the buffer then holds what it wrote, every element
            raise Refused("it writes the convolution's buffer in place other than once at every element after its "
                          "loads")
        return bool(stores)

    def _epilogue(self) -> ast.FunctionDef:
        sizes, _ = self.layout
        lines = [f"{p} = args[{i}]" for i, p in enumerate(self.passed)]
        lines += [f"{self.conv_arg} = out_ptr"] if self.in_place else []
        lines += [f"{n} = {v}" for n, v in self.numels.items()]
        lines += ["xindex = pixel.to(tl.int32)" if math.prod(sizes) < 2 ** 31 else "xindex = pixel"]
        lines += ["xmask = pixel_mask", "r0_index = channel", "r0_mask = channel_mask"]
        head = pyast.parse("\n".join(lines)).body
        kept = [_Body(self.conv_arg, self).visit(copy.deepcopy(s)) for s in self.source.body if not _header(s)]
        function = pyast.parse(f"@triton.jit\ndef {self.kernel}_epilogue({SIGNATURE}):\n    pass").body[0]
        function.body = head + kept
        return ast.fix_missing_locations(function)


def _header(statement: ast.stmt) -> bool:
    target = statement.targets[0] if isinstance(statement, ast.Assign) and len(statement.targets) == 1 else \
        statement.target if isinstance(statement, ast.AnnAssign) else None
    return isinstance(target, ast.Name) and target.id in HEADER


class _Body(ast.NodeTransformer):
    """A statement of the reduction's body for its epilogue: its loads of the convolution's buffer as the
    accumulator (where masked, its `other` elsewhere); its other loads and its stores of a pixel's or a channel's
    elements masked by the tile's pixel and channel masks too where Inductor left them out (it knew every index
    of its own tiles in range, not of the convolution's)."""

    def __init__(self, conv_arg: str, reduction: ChannelReduction):
        self.conv_arg, self.reduction = conv_arg, reduction

    def visit_Call(self, node):
        self.generic_visit(node)
        if ast.unparse(node.func) not in ("tl.load", "tl.store") or not node.args:
            return node
        at = 2 if ast.unparse(node.func) == "tl.store" else 1
        keywords = {k.arg: k.value for k in node.keywords}
        mask = node.args[at] if len(node.args) > at else keywords.get("mask")
        mask = None if isinstance(mask, ast.Constant) and mask.value is None else mask
        if at == 1 and self.conv_arg in names(node.args[0]):
            other = node.args[2] if len(node.args) > 2 else keywords.get("other")
            if mask is None or other is None:
                return ast.Name("acc")
            return ast.parse(f"tl.where({ast.unparse(mask)}, acc, {ast.unparse(other)})", mode="eval").body
        on = self.reduction._on(node.args[0])
        missing = [m for kind, m in (("x", "xmask"), ("r", "r0_mask")) if kind in on and
                   m not in (names(mask) if mask is not None else set())]
        if missing:
            needed = " & ".join(([f"({ast.unparse(mask)})"] if mask is not None else []) + missing)
            node.args = node.args[:at] + [ast.parse(needed, mode="eval").body] + node.args[at + 1:]
            node.keywords = [k for k in node.keywords if k.arg != "mask"]
        return node
