"""Inductor's elementwise kernels after a convolution, fused into kernelevo's convolution
(``kernelevo/seeds/kernels/conv.py``).

On a GPU Inductor peels a convolution's bias off the library call and adds it, with the rest of a level-2 problem's
elementwise work (activations, scaling, clamps, a second bias), in a pointwise kernel of its own that reads the
convolution's whole output back: in place (``buf1 = buf0`` then ``triton_poi_fused_add_relu_0.run(buf1, bias,
xnumel)``, a 1D kernel over the buffer), or into a new buffer of the same sizes in another layout (a channels-last
convolution's output written as NCHW by a 2D kernel over (batch x channel, pixel)). Each is a second pass over the
output. Where such a kernel's only role is to transform the convolution's output elementwise, the seed's
``conv_nd(...)`` runs it as its epilogue instead (``conv_nd``'s ``epilogue``): every convolution kernel applies it to
its accumulator tile before its one store, the output written once, in the layout the pointwise kernel wrote, and
the pointwise kernel's launch (and its tunable constants) is gone. The conv's own launch parameters stay tunable.

The epilogue is the pointwise kernel's body as a ``@triton.jit`` function ``(acc, offset, mask, args)``: its index
variables bound to the tile's elements (``xindex = offset % xnumel``, ``yindex = offset // xnumel``, y inner, or the
one index of a 1D kernel: ``offset`` is an element's offset in the output, or, for a kernel that ran in the
convolution's buffer's order, the element's offset there, computed from it), its masks to the tile's, its load of the
convolution's buffer replaced by the accumulator, its one store by ``return``; its other arguments (a bias, scalars)
come in ``args``. The output may be a new buffer or one whose memory Inductor reuses (``reinterpret_tensor`` of a
dead one): the fused convolution allocates it afresh. The binding is checked before it is used: evaluated on the
buffers' literal sizes and strides (every element of a small output, else 4096 drawn and the corners), the pointwise
kernel must read the convolution's buffer and write its output at the same element the tile holds.

A persistent reduction over each pixel's channels (a min, a logsumexp, a softmax over dim 1) is fused as a reducing
epilogue that stores its own outputs (``reductions.py``); the index arithmetic both check with is ``kernel_index.py``.

Left as it is (``Epilogues.refused`` says why): a reduction other than those (a norm, a mean over spatial
dimensions), one reading the buffer at other positions (pooling) or of other sizes, one with several stores, a buffer
something else reads too (several consumers), other statements between the convolution and the kernel, symbolic
sizes.
"""
from __future__ import annotations

import ast
import logging
import math
import re

import torch

from kernelevo.core import pyast
from kernelevo.seeds.inductor.kernel_index import Refused, address, coordinates, evaluate, literal, \
    names, offsets
from kernelevo.seeds.inductor.reductions import ChannelReduction

log = logging.getLogger(__name__)  # already under the kernelevo logger (the project's namespace)
LAUNCHER = "conv_nd"
NOTE = (" Elementwise kernels Inductor ran over a convolution's output are fused into it: conv_nd's epilogue (the "
        "*_epilogue functions) is applied to each output tile before its one store "
        "(kernelevo/seeds/inductor/epilogues.py).")
HEADER = {"xnumel", "ynumel", "xoffset", "yoffset", "xindex", "yindex", "xmask", "ymask"}  # rebound by the epilogue
INDEX = re.compile(r"[xy]\d+$")  # Inductor's index variables (x0 = xindex % 16)
ALLOCATORS = {"torch.empty_strided", "torch.as_strided"}
GUARDS = {"check_input"}  # statements that may stand between the convolution and its epilogue kernel


def _launch(statement: ast.stmt, kernels: dict) -> tuple[str, ast.Call] | None:
    """(kernel, call) where `statement` is a launch ``kernel[grid](...)`` of a pointwise kernel of `kernels`."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Subscript) and \
            isinstance(call.func.value, ast.Name) and call.func.value.id in kernels and \
            not kernels[call.func.value.id].get("template"):
        return call.func.value.id, call
    return None


def _is_call(statement: ast.stmt, names: set[str]) -> ast.Call | None:
    value = statement.value if isinstance(statement, (ast.Expr, ast.Assign)) else None
    return value if isinstance(value, ast.Call) and ast.unparse(value.func) in names else None


def _dense(sizes: tuple, strides: tuple) -> bool:
    """Whether the elements of a tensor of `sizes` and `strides` fill 0 .. numel - 1, each once."""
    expected = 1
    for size, stride in sorted(((s, t) for s, t in zip(sizes, strides) if s > 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _allocation(body: list[ast.stmt], at: int, aliases: set) -> tuple | None:
    """(sizes, strides, dtype, the buffer whose memory it reuses or None) where ``body[at]`` allocates a buffer: by
    ``torch.empty_strided``, or ``torch.as_strided(buffer, sizes, strides, 0)`` reusing a dead buffer's memory
    (Inductor's ``reinterpret_tensor``, of a buffer made so or renamed), of that buffer's dtype."""
    statement = body[at]
    call = statement.value if isinstance(statement, ast.Assign) else None
    if not isinstance(call, ast.Call) or names(call) & aliases:
        return None
    if ast.unparse(call.func) == "torch.empty_strided" and len(call.args) >= 2:
        dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
        return (call.args[0], call.args[1], dtype, None) if dtype is not None else None
    if ast.unparse(call.func) == "torch.as_strided" and len(call.args) == 4 and literal(call.args[3]) == 0 and \
            isinstance(call.args[0], ast.Name):
        base = call.args[0].id
        made = _made(body, at, base)
        while made is not None and isinstance(body[made].value, ast.Name) and body[made].value.id not in aliases:
            made = _made(body, made, body[made].value.id)  # a rename, followed
        earlier = _allocation(body, made, aliases) if made is not None else None
        return (call.args[1], call.args[2], earlier[2], base) if earlier else None
    return None


def _made(body: list[ast.stmt], at: int, buffer: str) -> int | None:
    """Where `buffer` is last assigned before ``body[at]``."""
    return next((i for i in range(at - 1, -1, -1) if isinstance(body[i], ast.Assign) and
                 ast.unparse(body[i].targets[0]) == buffer), None)


class Epilogues:
    """Fuses the pointwise kernels after ``conv_nd(...)`` in a seed's forward body (``fuse``): `kernels` is the
    converter's kernel table (name -> its runtime arguments, ...), `functions` the kernels' FunctionDefs, `sizes` the
    sizes Inductor asserts per buffer (``Convolutions.sizes``). After ``fuse``: ``functions`` (each epilogue after
    the kernel it came from; a kernel no launch is left of dropped), ``dropped`` (kernels gone), ``count`` (kernels
    fused), ``refused`` ((kernel, why) for each left as it is)."""

    def __init__(self, kernels: dict, functions: list[ast.FunctionDef], sizes: dict):
        self.kernels, self.sizes = kernels, sizes
        self.sources = {f.name: f for f in functions}
        self.functions, self.dropped, self.count, self.refused = list(functions), set(), 0, []
        self.reduced, self.untuned = 0, set()  # reductions fused; conv_nd parameters they make moot (BLOCK_N)
        self.epilogues = {}  # source -> name: an epilogue made twice (two launch sites alike) is defined once

    def fuse(self, body: list[ast.stmt]) -> list[ast.stmt]:
        body = list(body)
        for conv in [s for s in body if isinstance(s, ast.Assign) and _is_call(s, {LAUNCHER})]:
            body = self._fuse_after(body, next(i for i, s in enumerate(body) if s is conv))
        launched = {_launch(s, self.kernels)[0] for s in ast.walk(ast.Module(body=body, type_ignores=[]))
                    if isinstance(s, ast.stmt) and _launch(s, self.kernels)}
        self.dropped = {name for name in self.sources if name not in launched and self._fused_any(name)}
        self.functions = [f for f in self.functions if f.name not in self.dropped]
        return body

    def pruned(self, constants: list, tunable: dict) -> tuple[list, dict]:
        """The seed's `constants` ((name, value)) and `tunable` less the launch parameters of the kernels dropped."""
        gone = {name for kernel in self.dropped for name in self.kernels[kernel]["constants"].values()}
        return [c for c in constants if c[0] not in gone], {k: v for k, v in tunable.items()
                                                            if k not in gone | self.untuned}

    def _fused_any(self, kernel: str) -> bool:
        return any(f.name.startswith(f"{kernel}_epilogue") for f in self.functions)

    def _fuse_after(self, body: list[ast.stmt], at: int) -> list[ast.stmt]:
        """`body` with the pointwise kernel after the convolution at `at` fused into it, where it can be."""
        target = ast.unparse(body[at].targets[0])
        aliases, allocated = {target}, {}
        for later in range(at + 1, len(body)):
            statement = body[later]
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name) and \
                    statement.value.id in aliases:
                aliases.add(ast.unparse(statement.targets[0]))
                continue
            if _is_call(statement, GUARDS):
                continue
            allocation = _allocation(body, later, aliases)
            if allocation is not None:
                allocated[ast.unparse(statement.targets[0])] = (later, *allocation)
            if _is_call(statement, ALLOCATORS) or isinstance(statement, ast.Assign) and \
                    isinstance(statement.value, ast.Name):  # another buffer made or renamed (an output for later)
                if not names(statement) & aliases:
                    continue
            found = _launch(statement, self.kernels)
            try:
                if found is None or not names(found[1]) & aliases:
                    raise Refused(f"the statement after it is no kernel that reads it: {ast.unparse(statement)[:80]}")
                return self._fused(body, at, later, *found, aliases, allocated)
            except Refused as why:
                self.refused.append((found[0] if found else None, str(why)))
                log.info(f"{target} = {LAUNCHER}(...) keeps {found[0] if found else 'its output'} apart: {why}")
                return body
        self.refused.append((None, "no kernel reads its output"))
        return body

    def _fused(self, body, at: int, later: int, kernel: str, call: ast.Call, aliases: set, allocated: dict):
        runtime = self.kernels[kernel]["runtime"]
        if kernel.startswith(("triton_per_", "triton_red_")):
            return self._reduced(body, at, later, kernel, call, aliases, allocated)
        if not kernel.startswith("triton_poi_") or len(call.args) != len(runtime):
            raise Refused("not a pointwise kernel (a reduction reads many elements for each it writes)")
        given = dict(zip(runtime, call.args))
        reads = [name for name, arg in given.items() if isinstance(arg, ast.Name) and arg.id in aliases]
        if len(reads) != 1 or any(names(arg) & aliases for name, arg in given.items() if name not in reads):
            raise Refused("it takes the convolution's output more than once")
        source = self.sources[kernel]
        stores = [n for n in ast.walk(source) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.store"]
        if len(stores) != 1 or not isinstance(stores[0].args[0], ast.BinOp | ast.Name):
            raise Refused(f"it has {len(stores)} stores")
        written = names(stores[0].args[0]) & set(runtime)
        conv_arg, out_arg = reads[0], next(iter(written), None)
        in_place = out_arg == conv_arg
        if not in_place and (out_arg is None or ast.unparse(given[out_arg]) not in allocated):
            raise Refused("it writes somewhere else than the convolution's buffer or one allocated for it")
        later_uses = set().union(*(names(s) for s in body[later + 1:])) if later + 1 < len(body) else set()
        if not in_place and later_uses & aliases:
            raise Refused("the convolution's output is read again after it (several consumers)")
        if not in_place and later_uses & {allocated[ast.unparse(given[out_arg])][4]}:
            raise Refused("it writes into a buffer whose memory is read again after it")
        conv = body[at].value
        keywords = {k.arg: k for k in conv.keywords}
        conv_sizes = literal(ast.parse(self.sizes.get(ast.unparse(body[at].targets[0]), "None"), mode="eval").body)
        conv_strides = literal(keywords["out_stride"].value) if "out_stride" in keywords else None
        if in_place:
            out_sizes, out_strides = conv_sizes, conv_strides
        else:
            out_sizes, out_strides = (literal(v) for v in allocated[ast.unparse(given[out_arg])][1:3])
        if not all(isinstance(v, tuple) and all(type(e) is int for e in v)
                   for v in (conv_sizes, conv_strides, out_sizes, out_strides)):
            raise Refused("the sizes or strides of the convolution's output are not literals")
        if out_sizes != conv_sizes or not _dense(out_sizes, out_strides):
            raise Refused(f"it writes a tensor of sizes {out_sizes}, not the convolution's {conv_sizes}")
        numels = {n: literal(given[n]) for n in ("xnumel", "ynumel") if n in given}
        if set(runtime) - set(given) or any(type(v) is not int for v in numels.values()):
            raise Refused("its sizes are not literals")
        if not numels or math.prod(numels.values()) != math.prod(out_sizes):
            raise Refused(f"it runs over {numels}, not the convolution's {math.prod(out_sizes)} elements")
        layouts = (conv_sizes, conv_strides), (out_sizes, out_strides)
        numbered, order = self._binding(source, conv_arg, out_arg, numels, *layouts)
        int32 = math.prod(out_sizes) < 2 ** 31
        passed = [name for name in runtime if name not in (conv_arg, out_arg) and name not in numels]
        renumber = _renumbered(*layouts) if numbered == "conv" else []
        name = self._epilogue(kernel, source, conv_arg, passed, numels, order, int32, renumber)
        keywords["out_stride"].value = ast.parse(repr(out_strides), mode="eval").body  # the layout it writes
        if not in_place:
            conv.keywords.append(ast.keyword("out_dtype", allocated[ast.unparse(given[out_arg])][3]))
        conv.keywords.append(ast.keyword("epilogue", ast.Name(name)))
        args = ", ".join(ast.unparse(given[p]) for p in passed)
        conv.keywords.append(ast.keyword("epilogue_args", ast.parse(f"({args}{',' if passed else ''})",
                                                                    mode="eval").body))
        self.count += 1
        out = [] if in_place else [ast.parse(f"{ast.unparse(given[out_arg])} = {ast.unparse(body[at].targets[0])}")
                                   .body[0]]
        drop = {later} | (set() if in_place else {allocated[ast.unparse(given[out_arg])][0]})
        guards = [s for s in body[at + 1:later] if _is_call(s, GUARDS)]  # the inputs' checks, before any launch
        between = [s for i, s in enumerate(body[at + 1:later], at + 1) if i not in drop and not _is_call(s, GUARDS)]
        return body[:at] + guards + [body[at]] + between + out + body[later + 1:]

    def _reduced(self, body, at: int, later: int, kernel: str, call: ast.Call, aliases: set, allocated: dict):
        """`body` with the persistent reduction `kernel` over the convolution's channels as its epilogue
        (``reductions.py``): the buffers it writes allocated before the convolution, fresh."""
        conv = body[at].value
        keywords = {k.arg: k for k in conv.keywords}
        sizes = literal(ast.parse(self.sizes.get(ast.unparse(body[at].targets[0]), "None"), mode="eval").body)
        strides = literal(keywords["out_stride"].value) if "out_stride" in keywords else None
        if not all(isinstance(v, tuple) and all(type(e) is int for e in v) for v in (sizes, strides)):
            raise Refused("the sizes or strides of the convolution's output are not literals")
        reduction = ChannelReduction(kernel, self.kernels[kernel], self.sources[kernel], call, aliases,
                                     (sizes, strides))
        later_uses = set().union(*(names(s) for s in body[later + 1:])) if later + 1 < len(body) else set()
        if later_uses & aliases and not reduction.in_place:
            raise Refused("the convolution's output is read again after it (several consumers)")
        body = list(body)
        for output in reduction.outputs:
            if output.id not in allocated:
                raise Refused(f"it writes {output.id}, not a buffer allocated between the convolution and it")
            if {allocated[output.id][4]} & later_uses:
                raise Refused("it writes into a buffer whose memory is read again after it")
            if not _fresh(output.id, allocated):  # memory the convolution may still read: a buffer of its own
                where, shape, strides_node, dtype, _ = allocated[output.id]
                body[where] = ast.parse(f"{output.id} = torch.empty_strided({ast.unparse(shape)}, "
                                        f"{ast.unparse(strides_node)}, dtype={ast.unparse(dtype)}, "
                                        f"device={ast.unparse(conv.args[0])}.device)").body[0]
        name = self._named(kernel, reduction.function)
        args = ", ".join(ast.unparse(a) for a in reduction.args)
        conv.keywords += [ast.keyword("epilogue", ast.Name(name)), ast.keyword("epilogue_reduces", ast.Constant(True)),
                          ast.keyword("epilogue_args", ast.parse(f"({args}{',' if args else ''})", mode="eval").body)]
        if "BLOCK_N" in keywords and isinstance(keywords["BLOCK_N"].value, ast.Name):
            self.untuned.add(keywords["BLOCK_N"].value.id)  # conv_nd takes every channel in one tile
        self.count, self.reduced = self.count + 1, self.reduced + 1
        between = body[at + 1:later]
        before = [s for s in between if not names(s) & aliases]  # allocations and checks, none reads the output
        return body[:at] + before + [body[at]] + [s for s in between if names(s) & aliases] + body[later + 1:]

    def _binding(self, source: ast.FunctionDef, conv_arg: str, out_arg: str, numels: dict, conv: tuple,
                 out: tuple) -> tuple[str, str]:
        """How the epilogue numbers an output element as the kernel did: (by its offset in the output, ``"out"``,
        or in the convolution's buffer, ``"conv"``; ``"x"``: xindex = offset, ``"xy"``: x inner, ``"yx"``: y
        inner), checked on the buffers' elements; Refused when none reads the convolution's buffer and writes its
        output at the element the tile holds."""
        statements = [s for s in source.body if isinstance(s, ast.Assign) and len(s.targets) == 1 and
                      isinstance(s.targets[0], ast.Name)]
        index = [s for s in statements if INDEX.match(s.targets[0].id)]
        calls = [n for n in ast.walk(source) if isinstance(n, ast.Call) and ast.unparse(n.func) in
                 ("tl.load", "tl.store") and conv_arg in names(n.args[0] if n.args else n)]
        store = next(n for n in ast.walk(source) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.store")
        if any(conv_arg in names(n) for n in ast.walk(source) if isinstance(n, ast.Call) and n not in calls and
               ast.unparse(n.func) not in ("tl.load", "tl.store")):
            raise Refused(f"it uses {conv_arg} other than by tl.load")
        coords = coordinates(conv[0])
        conv_offsets, out_offsets = offsets(*conv, coords), offsets(*out, coords)
        orders = ["x"] if set(numels) == {"xnumel"} else ["xy", "yx"]
        for numbered, order in [(layout, order) for layout in ("out", "conv") for order in orders]:
            at = out_offsets if numbered == "out" else conv_offsets
            env = dict(zip(("xindex", "yindex"), _split(at, order, numels)))
            try:
                for statement in index:
                    env[statement.targets[0].id] = evaluate(statement.value, env)
                reads = [evaluate(address(c, conv_arg), env) for c in calls if ast.unparse(c.func) == "tl.load"]
                stored = evaluate(address(store, out_arg), env)
            except (Refused, KeyError, ZeroDivisionError):
                continue
            if all(torch.equal(torch.as_tensor(r).expand_as(conv_offsets), conv_offsets) for r in reads) and \
                    torch.equal(torch.as_tensor(stored).expand_as(out_offsets), out_offsets):
                return numbered, order
        raise Refused("it reads the convolution's output or writes its own at other elements than the one it computes "
                      "(pooling, a transpose, a broadcast)")

    def _epilogue(self, kernel: str, source: ast.FunctionDef, conv_arg: str, passed: list[str],
                  numels: dict, order: str, int32: bool, renumber: list[str]) -> str:
        """The name of the epilogue function for `kernel` (made and added after it where new)."""
        lines = [f"{p} = args[{i}]" for i, p in enumerate(passed)]
        lines += [f"{n} = {v}" for n, v in numels.items()]
        lines += ["offset = offset.to(tl.int32)"] if int32 else []
        lines += renumber
        lines += {"x": ["xindex = offset"], "xy": ["xindex = offset % xnumel", "yindex = offset // xnumel"],
                  "yx": ["yindex = offset % ynumel", "xindex = offset // ynumel"]}[order]
        lines += ["xmask = mask", "ymask = mask"]
        head = pyast.parse("\n".join(lines)).body
        kept = []
        for statement in source.body:
            if isinstance(statement, ast.Assign) and ast.unparse(statement.targets[0]) in HEADER:
                continue
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and \
                    ast.unparse(statement.value.func) == "tl.store":
                kept.append(ast.Return(statement.value.args[1]))
                continue
            kept.append(_Body(conv_arg).visit(statement))
        used = set().union(*(names(s) for s in kept))
        blocked = used & {"XBLOCK", "YBLOCK", "xoffset", "yoffset", "R0_BLOCK", "RBLOCK"}
        if blocked or any(isinstance(n, ast.Subscript) for s in kept for n in ast.walk(s)) or \
                not isinstance(kept[-1], ast.Return):
            raise Refused(f"its body depends on its own tiling ({', '.join(sorted(blocked)) or 'a subscript'})")
        function = pyast.parse(f"@triton.jit\ndef {kernel}_epilogue(acc, offset, mask, args):\n    pass").body[0]
        function.body = head + kept
        return self._named(kernel, function)

    def _named(self, kernel: str, function: ast.FunctionDef) -> str:
        """The name of epilogue `function` of `kernel`: added after the kernel where it is new."""
        text = ast.unparse(function)
        if text in self.epilogues:
            return self.epilogues[text]
        name = f"{kernel}_epilogue" + (f"_{len(self.epilogues)}" if self._fused_any(kernel) else "")
        function.name = name
        self.epilogues[text] = name
        self.functions.insert(self.functions.index(self.sources[kernel]) + 1, function)
        return name


def _fresh(buffer: str, allocated: dict) -> bool:
    """Whether `buffer`'s memory was allocated after the convolution (`allocated`: the buffers made between it
    and its epilogue's kernel), not memory of a buffer made before it that Inductor reuses."""
    base = allocated[buffer][4] if buffer in allocated else buffer
    return buffer in allocated and (base is None or _fresh(base, allocated))


def _renumbered(conv: tuple, out: tuple) -> list[str]:
    """Statements turning an element's offset in the output (layout `out`: sizes, strides) into its offset in the
    convolution's buffer (layout `conv`), the numbering a kernel that ran over the buffer's order used."""
    terms = [f"(offset // {stride} % {size}) * {conv_stride}" for size, stride, conv_stride in
             zip(out[0], out[1], conv[1]) if size > 1]
    return [f"offset = {' + '.join(terms) or '0 * offset'}"]


def _split(offsets: torch.Tensor, order: str, numels: dict) -> tuple:
    """(xindex, yindex) of the output elements at `offsets` numbered in `order` (``Epilogues._binding``)."""
    if order == "x":
        return (offsets,)
    if order == "xy":
        return offsets % numels["xnumel"], offsets // numels["xnumel"]
    return offsets // numels["ynumel"], offsets % numels["ynumel"]


class _Body(ast.NodeTransformer):
    """A statement of the kernel's body for its epilogue: its loads of the convolution's buffer as the accumulator,
    its other loads masked by the tile's mask where Inductor gave none (it knew every index in range)."""

    def __init__(self, conv_arg: str):
        self.conv_arg = conv_arg

    def visit_Call(self, node):
        self.generic_visit(node)
        if ast.unparse(node.func) != "tl.load":
            return node
        if node.args and self.conv_arg in names(node.args[0]):
            return ast.Name("acc")
        if len(node.args) < 2 and not any(k.arg == "mask" for k in node.keywords):
            node.args.append(ast.Name("mask"))
        elif len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value is None:
            node.args[1] = ast.Name("mask")
        return node
