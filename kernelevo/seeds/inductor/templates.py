"""Inductor's Triton GEMM templates (``max-autotune`` over Triton's backend) as tunable kernels.

A template kernel (``triton_tem_*``) is rendered for one configuration: its block sizes are ``tl.constexpr``
assignments in the body (``BLOCK_M : tl.constexpr = 64``), the matrix sizes are literals (``M = 1024``) and the
launch passes a fixed grid (``grid_type: FixedGrid``). For a GEMM's template the block sizes become the kernel's
constexpr parameters, declared in ``TUNABLE`` with Inductor's choice as the default, and the grid is computed from
them (``cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)`` programs on axis 0, the captured extent on the other axes). Any other
template (a convolution's: max-autotune's conv2d/conv3d templates) is launched on its captured grid with its block
sizes as Inductor rendered them; only its warps and stages are tunable.
"""
from __future__ import annotations

import ast

from kernelevo.seeds.inductor.errors import OTHER_SEEDS, SeedError

TEMPLATE_BLOCKS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")
BLOCK_CHOICES = {"BLOCK_M": [16, 32, 64, 128, 256], "BLOCK_N": [16, 32, 64, 128, 256],
                 "BLOCK_K": [16, 32, 64, 128], "GROUP_M": [1, 4, 8, 16]}


def inductor_meta(source: str, name: str) -> dict:
    """The ``inductor_meta`` literal of a kernel's heuristics decorator ({} when there is none)."""
    tree = ast.parse(source)
    function = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    for decorator in function.decorator_list if function else []:
        for keyword in getattr(decorator, "keywords", []):
            if keyword.arg == "inductor_meta":
                try:
                    return ast.literal_eval(keyword.value)
                except ValueError:
                    return {}
    return {}


def is_template(meta: dict) -> bool:
    return meta.get("grid_type") == "FixedGrid" and bool(meta.get("config_args"))


def is_gemm_template(function: ast.FunctionDef) -> bool:
    """A template whose matrix sizes are literals ``M``, ``N``, ``K`` (a GEMM's, whose grid ``template_grid``
    computes); any other (a convolution's) keeps its block sizes as rendered and its captured grid."""
    try:
        return all(_literal(function, d) for d in ("M", "N", "K"))
    except SeedError:
        return False


def _literal(function: ast.FunctionDef, name: str) -> int:
    for node in function.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == name and \
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            return node.value.value
    raise SeedError(f"template kernel {function.name}: no literal size {name}; {OTHER_SEEDS}")


def _constexpr_value(function: ast.FunctionDef, name: str):
    for node in function.body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == name and node.value is not None:
            return ast.literal_eval(node.value) if isinstance(node.value, ast.Constant) else ast.unparse(node.value)
    return None


def template_kernel(function: ast.FunctionDef) -> tuple[dict, dict, dict]:
    """Make the template's block sizes constexpr parameters of `function` (in place).
    Returns (defaults, choices, sizes): Inductor's block sizes, the values each may take, and M, N, K."""
    sizes = {d: _literal(function, d) for d in ("M", "N", "K")}
    defaults = {b: _constexpr_value(function, b) for b in TEMPLATE_BLOCKS}
    defaults = {b: v for b, v in defaults.items() if isinstance(v, int)}
    if not {"BLOCK_M", "BLOCK_N", "BLOCK_K"} <= set(defaults):
        raise SeedError(f"template kernel {function.name}: block sizes not found; {OTHER_SEEDS}")
    function.body = [n for n in function.body if not (isinstance(n, ast.AnnAssign)
                                                      and ast.unparse(n.target) in defaults)]
    for block in defaults:
        function.args.args.append(ast.arg(arg=block, annotation=ast.parse("tl.constexpr", mode="eval").body))
    choices = {b: sorted(set(BLOCK_CHOICES[b]) | {v}) for b, v in defaults.items()}
    if _constexpr_value(function, "EVEN_K") is True:  # the K loop's loads were rendered without a mask
        choices["BLOCK_K"] = [c for c in choices["BLOCK_K"] if sizes["K"] % c == 0]
    return defaults, choices, sizes


def template_grid(kernel: str, info: dict, captured_grid: list[ast.expr]) -> str:
    """The launch grid of a template kernel from its (tunable) block sizes; checked against the captured grid."""
    sizes, names, defaults = info["sizes"], info["constants"], info["defaults"]
    try:
        extents = [ast.literal_eval(g) for g in captured_grid]
    except ValueError as exc:
        raise SeedError(f"kernel {kernel}: the captured grid is not literal; {OTHER_SEEDS}") from exc
    programs = -(-sizes["M"] // defaults["BLOCK_M"]) * -(-sizes["N"] // defaults["BLOCK_N"])
    tiles = f"triton.cdiv({sizes['M']}, {names['BLOCK_M']}) * triton.cdiv({sizes['N']}, {names['BLOCK_N']})"
    persistent = info.get("persistent")  # NUM_SMS programs loop over the tiles (Inductor's persistent TMA template)
    if persistent:
        programs, tiles = min(programs, persistent), f"min({persistent}, {tiles})"
    if len(extents) != 3 or extents[0] != programs:
        raise SeedError(f"kernel {kernel}: Inductor launched grid {extents}, not cdiv(M, BLOCK_M) * cdiv(N, "
                        f"BLOCK_N) = {programs} programs; this template's grid is not supported; {OTHER_SEEDS}")
    return f"{tiles}, {extents[1]}, {extents[2]}"


def persistent_programs(function: ast.FunctionDef) -> int | None:
    """A persistent template's program count (its ``NUM_SMS`` constexpr, over which its tiles loop), else None."""
    value = _constexpr_value(function, "NUM_SMS")
    return value if isinstance(value, int) else None


# K-major operands ------------------------------------------------------------------------------------------------
# Hopper's TF32 tensor-core instruction reads both operands K-major; an fp32 operand whose tile is contiguous along M
# or N (B of `A @ B`, row-major) leaves Triton a slower path at the same tile (docs/measurements.md). Such an
# operand is copied K-major first when the kernel's `<operand>_KMAJOR` constant is 1 (the default where the template
# allows TF32; the tuner may try 0).
OPERAND_INDICES = {"A": ("idx_n", "idx_m", "M"), "B": ("idx_m", "idx_n", "N")}  # operand: K index, other, its size
K_MAJOR_NOTE = (" A GEMM operand stored contiguous along M or N is first copied K-major (k_major), the layout Hopper's "
                "TF32 tensor cores read; its kernel's *_KMAJOR constant set to 0 loads it as Inductor did.")
K_MAJOR_COPY = '''
@triton.jit
def _k_major_copy(src, dst, K, D, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr):
    """dst[b, d, k] = src[b, k, d]: an operand stored contiguous along D (M or N), copied contiguous along K; b is
    axis 2 of the grid (a batched GEMM's operand, one K x D matrix after another)."""
    offs_k = tl.program_id(0) * BLOCK_K + tl.arange(0, BLOCK_K)
    offs_d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    batch = tl.program_id(2).to(tl.int64) * K * D
    mask = (offs_k[:, None] < K) & (offs_d[None, :] < D)
    tile = tl.load(src + batch + offs_k[:, None] * D + offs_d[None, :], mask=mask)
    tl.store(dst + batch + offs_d[None, :] * K + offs_k[:, None], tile, mask=mask)


def k_major(src, K, D, batch=1):
    """The K x D operand at src's storage (row-major; `batch` of them, one after another), as D x K row-major
    copies."""
    dst = torch.empty((batch, D, K) if batch > 1 else (D, K), dtype=src.dtype, device=src.device)
    _k_major_copy[(triton.cdiv(K, 64), triton.cdiv(D, 64), batch)](src, dst, K, D, BLOCK_K=64, BLOCK_D=64)
    return dst
'''


def _operand_address(pointer: ast.expr, index: str) -> tuple[str, str]:
    """(operand, address) of a template's load pointer: ``A + xindex`` (the address is `index`, xindex's last
    value) or ``A + tl.broadcast_to(ADDRESS, [...]).broadcast_to(xindex.shape)``; ("", "") for anything else."""
    if not (isinstance(pointer, ast.BinOp) and isinstance(pointer.op, ast.Add) and isinstance(pointer.left, ast.Name)):
        return "", ""
    offset = pointer.right
    if ast.unparse(offset) == "xindex":
        return pointer.left.id, index
    if isinstance(offset, ast.Call) and ast.unparse(offset.func).endswith(").broadcast_to") and \
            [ast.unparse(a) for a in offset.args] == ["xindex.shape"]:
        inner = offset.func.value
        if isinstance(inner, ast.Call) and ast.unparse(inner.func) == "tl.broadcast_to" and inner.args:
            return pointer.left.id, ast.unparse(inner.args[0])
    return "", ""


def k_major_loads(function: ast.FunctionDef, sizes: dict) -> dict:
    """Give each operand that a TF32 template loads contiguous along M or N a ``<operand>_KMAJOR`` constexpr
    parameter (in place): with it 1, the load reads a K-major copy (``k_major``). Returns {runtime argument:
    (parameter, K, size of the other dimension, batch)}; {} where the template does not allow TF32 or loads no
    operand at an address ``other + D * k_index`` (``_operand_address``) nor through batched strides
    (``k_major_strides``)."""
    if _constexpr_value(function, "ALLOW_TF32") is not True:
        return {}
    bound = {ast.unparse(n.targets[0]): n.value.id for n in function.body
             if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and ast.unparse(n.targets[0]) in ("A", "B")}
    found = {}
    for holder in [n for n in ast.walk(function) if isinstance(getattr(n, "body", None), list)]:
        index = ""
        for position, statement in enumerate(list(holder.body)):
            if isinstance(statement, ast.Assign) and ast.unparse(statement.targets[0]) == "xindex":
                index = ast.unparse(statement.value)
                continue
            call = statement.value if isinstance(statement, ast.Assign) else None
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "tl.load" and call.args):
                continue
            operand, address = _operand_address(call.args[0], index)
            if operand not in OPERAND_INDICES or operand not in bound or operand in found.values():
                continue
            k_index, other, dim = OPERAND_INDICES[operand]
            if address != f"{other} + {sizes[dim]} * {k_index}":
                continue
            param = f"{operand}_KMAJOR"
            k_major_load = ast.parse(ast.unparse(statement)).body[0]
            k_major_load.value.args[0] = ast.parse(f"{operand} + ({k_index} + {sizes['K']} * {other})",
                                                   mode="eval").body
            holder.body[position] = ast.If(test=ast.Name(id=param), body=[k_major_load], orelse=[statement])
            found[bound[operand]] = operand
    batch = 1
    if not found:  # a batched template (Inductor's bmm) reads its operands through literal strides instead
        found, batch = k_major_strides(function, bound, sizes), _literal_or_none(function, "BATCH") or 1
    for runtime, operand in found.items():
        function.args.args.append(ast.arg(arg=f"{operand}_KMAJOR",
                                          annotation=ast.parse("tl.constexpr", mode="eval").body))
    return {runtime: (f"{operand}_KMAJOR", sizes["K"], sizes[OPERAND_INDICES[operand][2]], batch)
            for runtime, operand in found.items()}


# operand: (its batch, K and other strides' names, the other dimension's size)
BATCHED_STRIDES = {"A": ("stride_aq", "stride_ak", "stride_am", "M"), "B": ("stride_bq", "stride_bk", "stride_bn", "N")}
MAX_COPY_BATCH = 65535  # the copy's batch is its grid's axis 2


def k_major_strides(function: ast.FunctionDef, bound: dict, sizes: dict) -> dict:
    """Give each operand of a batched template whose literal strides read it contiguous along M or N (``stride_bn =
    1``, ``stride_bk = N``, one matrix after another) a ``<operand>_KMAJOR`` constexpr: with it 1, the strides are a
    K-major copy's (``k_major``). Returns {runtime argument: operand}."""
    batch = _literal_or_none(function, "BATCH")
    if batch is None or batch > MAX_COPY_BATCH:
        return {}
    found = {}
    for operand, (q, k, other, dim) in BATCHED_STRIDES.items():
        strides = {name: _literal_or_none(function, name) for name in (q, k, other)}
        if operand not in bound or strides != {q: sizes["K"] * sizes[dim], k: sizes[dim], other: 1}:
            continue
        param = f"{operand}_KMAJOR"
        for position, node in enumerate(function.body):
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in (k, other):
                name = ast.unparse(node.targets[0])
                k_major = ast.parse(f"{name} = {1 if name == k else sizes['K']}").body[0]
                function.body[position] = ast.If(test=ast.Name(id=param), body=[k_major], orelse=[node])
        found[bound[operand]] = operand
    return found


def _literal_or_none(function: ast.FunctionDef, name: str) -> int | None:
    try:
        return _literal(function, name)
    except SeedError:
        return None
