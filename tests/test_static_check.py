"""The static check names the line of every forbidden construct and lets plain Triton modules through."""
import pytest

from conftest import candidate
from fitness.problem import resolve_problem, suite_names
from fitness.static_check import check_source


def findings(source: str) -> list[str]:
    return [str(f) for f in check_source(source)]


@pytest.mark.parametrize("name", suite_names())
def test_bundled_seeds_pass(name):
    assert findings(resolve_problem(name).seed_source()) == []


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
])
def test_forbidden_constructs_are_named_with_their_line(source, expected):
    assert any(expected in f for f in findings(source)), findings(source)


def test_candidate_modules_of_their_own_are_fine():
    assert findings(candidate("good")) == []
    assert findings("import math\nimport triton.language as tl\nclass ModelNew:\n    def __init__(self):\n"
                    "        self._cache = {}\n        self.__init__\n") == []


def test_syntax_errors_raise():
    with pytest.raises(SyntaxError):
        check_source("def (")
