"""The static check names the line of every forbidden construct and lets plain Triton modules through."""
import pytest

from conftest import candidate
from fitness.problems.problem import resolve_problem, suite_names
from fitness.judge.static_check import check_source


def findings(source: str) -> list[str]:
    return [str(f) for f in check_source(source)]


@pytest.mark.parametrize("name", suite_names())
def test_bundled_seeds_pass(name):
    assert findings(resolve_problem(name).seed_source()) == []


def test_inductors_jit_helpers_are_the_one_private_module_a_candidate_may_import():
    helpers = "import torch._inductor.runtime.triton_helpers as triton_helpers\n"
    assert findings(helpers + "y = triton_helpers.max2") == []
    assert "private API" in " ".join(findings(helpers + "y = triton_helpers._log_2_e"))
    assert "not allowed" in " ".join(findings("import torch._inductor.utils"))


@pytest.mark.parametrize("source, expected", [
    ("import subprocess", "line 1: import of 'subprocess' is not allowed (process access)"),
    ("import socket", "line 1: import of 'socket' is not allowed (network access)"),
    ("from ctypes import CDLL", "line 1: import of 'ctypes' is not allowed (FFI)"),
    ("import gc", "line 1: import of 'gc' is not allowed (introspection)"),
    ("import threading", "line 1: import of 'threading' is not allowed (threads)"),
    ("x = 1\nf = open('/etc/passwd')", "line 2: call to open() is not allowed (file access)"),
    ("eval('1')", "call to eval() is not allowed"),
    ("import torch\ntorch.matmul = None", "line 2: assignment into module 'torch' is not allowed (monkey-patching)"),
    ("import triton\ntriton.testing.do_bench = 1", "assignment into module 'triton'"),
    ("import torch\nx = torch.backends.cuda.matmul", "'torch.backends.cuda.matmul' is not allowed"),
    ("import torch\nf = torch.compile(abs)", "'torch.compile' is not allowed"),
    ("import torch\ntorch.utils.cpp_extension.load_inline('a', 'b')", "'torch.utils.cpp_extension.load_inline'"),
    ("def f():\n    return f.__globals__", "line 2: dunder attribute '.__globals__' is not allowed"),
    ("def f(frame):\n    return frame.f_back", "frame access '.f_back'"),
    ("import torch\ns = torch.cuda.Stream()", "CUDA streams"),
    ("from torch.cuda import Stream", "CUDA streams"),
    ("import torch\ng = torch.cuda.CUDAGraph()", "CUDA graphs"),
    ("import torch\nx = torch._C", "private API"),
    ("setattr(object, 'x', 1)", "dynamic attribute access"),
    ("import torch\ntorch.os.system('ls')", "line 2: attribute chain through module '.os' is not allowed"),
    ("import torch\nm = torch.sys.modules['os']", "line 2: attribute chain through module '.sys'"),
    ("import torch\nm = torch\nm.os.system('ls')", "line 3: attribute chain through module '.os'"),
    ("def f(t):\n    return t.builtins.open", "line 2: attribute chain through module '.builtins'"),
    ("import torch\nm = torch.cuda\ns = m.Stream()", "line 3: 'torch.cuda.Stream' is not allowed"),
    ("import torch\nm = torch\nm.matmul = abs", "line 3: assignment into module 'torch'"),
    ("import torch\nx = getattr(torch, 'os', None).system", "line 2: attribute chain through module '.os'"),
    ("import typing\nh = typing.get_type_hints(abs)", "line 2: 'typing.get_type_hints' is not allowed"),
    ("from typing import get_type_hints", "line 1: 'typing.get_type_hints' is not allowed"),
    ("def f(t):\n    return t.get_type_hints", "line 2: '.get_type_hints' is not allowed"),
    ("import torch\ntorch.save(1, 'f')", "line 2: 'torch.save' is not allowed (file access)"),
    ("import torch\nx = torch.load('f')", "line 2: 'torch.load' is not allowed (file access)"),
    ("from torch import save", "line 1: 'torch.save' is not allowed"),
    ("def f(x):\n    x.numpy().tofile('/tmp/a')", "line 2: '.tofile' is not allowed (file access)"),
    ("import torch\ns = torch.UntypedStorage.from_file('f')", "line 2: '.from_file' is not allowed"),
    ("getattr(f, '__globals__', None)", "dunder attribute '.__globals__'"),
    ("import torch\nc = getattr(torch, 'compile', None)", "'torch.compile' is not allowed"),
    ("getattr(f, name, None)", "call to getattr() is not allowed"),
    # the issue-63 red team's escapes: host compute the op trace cannot see, FFI and files through numpy
    ("def f(x):\n    return x.numpy() @ x.numpy()",
     "line 2: '.numpy' is not allowed (a tensor's values taken to the host"),
    ("def f(x):\n    return sum(x.tolist())", "line 2: '.tolist' is not allowed"),
    ("import torch\nf = torch.Tensor.numpy", "line 2: '.numpy' is not allowed"),
    ("import torch\ny = torch.from_numpy(a)", "line 2: 'torch.from_numpy' is not allowed (host compute"),
    ("from torch import from_numpy", "line 1: 'torch.from_numpy' is not allowed"),
    ("import numpy as np\nclass M:\n    def __init__(self):\n        np.ctypeslib.load_library('libc', '/')",
     "line 4: 'numpy.ctypeslib.load_library' is not allowed (FFI)"),
    ("import numpy.ctypeslib", "line 1: 'numpy.ctypeslib' is not allowed (FFI)"),
    ("from numpy import ctypeslib", "line 1: 'numpy.ctypeslib' is not allowed (FFI)"),
    ("def f(a):\n    return a.ctypes.data", "line 2: attribute chain through module '.ctypes'"),
    ("import numpy as np\nclass M:\n    def __init__(self):\n        self.w = np.load('w.npy')",
     "line 4: 'numpy.load' is not allowed (file access)"),
    ("import numpy as np\nclass M:\n    def __init__(self):\n        self.w = np.memmap('w')",
     "line 4: 'numpy.memmap' is not allowed (file access)"),
    ("from numpy import loadtxt", "line 1: 'numpy.loadtxt' is not allowed (file access)"),
    # torch's global module hooks run inside the reference's forward and construction too
    ("import torch.nn.modules.module as m\nm.register_module_forward_hook(f)",
     "line 2: '.register_module_forward_hook' is not allowed (a global nn.Module hook runs inside the reference"),
    ("from torch.nn.modules.module import register_module_module_registration_hook as r",
     "line 1: '.register_module_module_registration_hook' is not allowed (a global nn.Module hook"),
    ("import torch\ntorch.nn.modules.module.register_module_forward_pre_hook(f)",
     "'.register_module_forward_pre_hook' is not allowed"),
    ("import torch\nh = torch.nn.modules.module._global_forward_hooks", "private API"),
    ("def f(kernel, hook):\n    kernel.add_pre_run_hook(hook)", "line 2: '.add_pre_run_hook' is not allowed (code run"),
])
def test_forbidden_constructs_are_named_with_their_line(source, expected):
    assert any(expected in f for f in findings(source)), findings(source)


def test_candidate_modules_of_their_own_are_fine():
    assert findings(candidate("good")) == []
    assert findings("import math\nimport triton.language as tl\nclass ModelNew:\n    def __init__(self):\n"
                    "        self._cache = {}\n        self.__init__\n") == []


def test_getattr_with_a_constant_name_and_a_default_is_plain_attribute_access():
    assert findings(candidate("getattr_default")) == []
    assert findings("class M:\n    def f(self):\n        return getattr(self.linear, 'bias', None)\n") == []
    assert findings("class M:\n    def f(self):\n        self.os = 1\n        return self.os\n") == []


def test_syntax_errors_raise():
    with pytest.raises(SyntaxError):
        check_source("def (")


NUMPY_IN_INIT = """import collections.abc
import numpy as np
import torch


def to_2tuple(x):
    return tuple(x) if isinstance(x, collections.abc.Iterable) else (x, x)


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.log2(torch.arange(4.0) + 1.0) / np.log2(8))
"""


def test_a_references_construction_code_may_use_numpy_and_collections_but_nothing_forward_runs_may():
    """level3/29 and 30 (Swin) had no kernel on 4 x H200: their seeds carry the reference's classes, whose imports
    (collections.abc, numpy for a constant while building a buffer) the check refused."""
    assert findings(NUMPY_IN_INIT) == []
    in_forward = NUMPY_IN_INIT + ("\n    def forward(self, x):\n"
                                  "        return torch.from_numpy(np.cos(x.cpu().numpy()))\n")
    assert sorted(findings(in_forward)) == sorted([
        "line 16: 'numpy.cos' outside __init__ is not allowed (numpy computes on the host: only building the module "
        "may use it)",
        "line 16: 'torch.from_numpy' is not allowed (host compute through numpy, which the op trace cannot see)",
        "line 16: '.numpy' is not allowed (a tensor's values taken to the host as numpy, where the op trace cannot "
        "see what is computed)"])
    kept = NUMPY_IN_INIT + "        self.np = np\n        f = lambda v: np.cos(v)\n"
    assert findings(kept) == [
        "line 14: the module 'numpy' itself as a value is not allowed (it would reach forward)",
        "line 15: 'numpy.cos' outside __init__ is not allowed (numpy computes on the host: only building the module "
        "may use it)"]
    assert "outside __init__" in " ".join(findings("from numpy import cos\ny = cos(1.0)"))
