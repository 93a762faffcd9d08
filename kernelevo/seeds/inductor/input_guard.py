"""The guard at the top of a seed's forward: the inputs its kernels were built for, checked before any launch.

Inductor's ``call()`` asserts each argument's sizes and strides (``assert_size_stride(arg0_1, (16, 32), (32, 1))``)
before it launches anything; its ``get_args()`` says each argument's dtype (``rand_strided(..., dtype=...)``). The
converter writes each such assert of an argument (a parameter, a buffer or an input of forward, not a buffer of its
own) as a call of ``check_input`` at the same place, so forward raises a ``ValueError`` naming the expected and the
given shape, strides, dtype and device, where the kernels would read or write outside their tensors or compute
something else. A size Inductor compiled as a literal (static capture: all of them) must match; a size it read from
the inputs (dynamic shapes: ``s77``) is the input's own, so only what stayed specialised is checked, and the strides
(contiguity) always. The guard is ordinary code of forward, so every descendant keeps it unless it rewrites forward.
"""
from __future__ import annotations

import ast

GUARD = "check_input"
ASSERT = "assert_size_stride"
NOTE = (" forward checks the shape, strides, dtype and device of each tensor it is given (check_input) and raises "
        "a ValueError before any launch where they are not what its kernels were built for.")
GUARD_HELPER = f'''
def {GUARD}(name, tensor, shape, stride, dtype, device):
    """A ValueError, before any launch, where `tensor` is not what forward's kernels were built for: its shape, its
    strides (of dimensions of more than one element), its dtype (None: any) or its device type."""
    if tensor.shape == shape and tensor.stride() == stride and tensor.dtype == dtype and tensor.device.type == device:
        return  # what it was built for, exactly: the one comparison of each
    given, strides = tuple(tensor.shape), tuple(tensor.stride())
    if given != tuple(shape) or (dtype is not None and tensor.dtype != dtype) or tensor.device.type != device \\
            or any(n > 1 and s != t for n, s, t in zip(given, strides, stride)):
        raise ValueError(f"ModelNew.forward: {{name}} expected shape {{tuple(shape)}} (strides {{tuple(stride)}}, "
                         f"{{dtype}}, {{device}}), given shape {{given}} (strides {{strides}}, {{tensor.dtype}}, "
                         f"{{tensor.device.type}}): these kernels were built for the expected one")
'''


def input_dtypes(code_tree: ast.Module) -> dict[str, str]:
    """Each argument's dtype as Inductor's ``get_args()`` makes it (``arg0_1 = rand_strided(...,
    dtype=torch.float32)``): name -> the dtype's expression."""
    dtypes = {}
    get_args = next((n for n in code_tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_args"), None)
    for node in ast.walk(get_args) if get_args is not None else []:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                ast.unparse(node.value.func).endswith("rand_strided"):
            dtype = next((k.value for k in node.value.keywords if k.arg == "dtype"), None)
            if dtype is not None:
                dtypes[ast.unparse(node.targets[0])] = ast.unparse(dtype)
    return dtypes


def guard_statement(call: ast.Call, labels: dict, dtypes: dict, device: str) -> ast.Expr | None:
    """``check_input(...)`` for an ``assert_size_stride`` of one of call()'s arguments (`labels`: its name -> what
    forward binds it to), or None for any other (a buffer of forward's own)."""
    if not ast.unparse(call.func).endswith(ASSERT) or len(call.args) < 3 or ast.unparse(call.args[0]) not in labels:
        return None
    name = ast.unparse(call.args[0])
    text = (f"{GUARD}({labels[name]!r}, {name}, {ast.unparse(call.args[1])}, {ast.unparse(call.args[2])}, "
            f"{dtypes.get(name, 'None')}, {device!r})")
    return ast.Expr(ast.parse(text, mode="eval").body)
