"""``ast.parse`` behind one lock. CPython 3.11 can fail with "SystemError: AST constructor recursion depth
mismatch" when several threads parse at once (python/cpython#106905); a search parses genomes in many threads."""
from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, *args, **kwargs) -> ast.Module:
    with _LOCK:
        return ast.parse(source, *args, **kwargs)
