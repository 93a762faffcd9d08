"""The import graph of the packages (evo, fitness, operators, kernelevo): exit 1 naming each cycle of module-level
imports, and each module-level import of fitness/ from evo/ or operators/ (the judge imports no layer above it).

    python scripts/import_graph.py            # from the repository root
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evo", "fitness", "operators", "kernelevo")
UPWARD = {"fitness": ("evo", "operators", "kernelevo")}  # a package -> the packages it must not import at load


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(tree: ast.Module):
    """The statements run when the module loads: its body, into if/try blocks, not functions nor TYPE_CHECKING."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        elif isinstance(node, (ast.If, ast.Try)):
            todo.extend([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                         *[s for h in getattr(node, "handlers", []) for s in h.body]])
        else:
            yield node


def imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports when it loads (a `from package import name` of a submodule counts it)."""
    found = set()
    for node in _top_level(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in modules}


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    return {name: imports(path, set(paths)) - {name} for name, path in paths.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def upward(edges: dict[str, set[str]]) -> list[str]:
    return [f"{a} imports {b}" for a, targets in sorted(edges.items()) for b in sorted(targets)
            if b.split(".")[0] in UPWARD.get(a.split(".")[0], ())]


def main() -> int:
    edges = graph()
    problems = [f"cycle: {' <-> '.join(c)}" for c in cycles(edges)] + [f"upward: {u}" for u in upward(edges)]
    print("\n".join(problems) or f"{len(edges)} modules: no import cycle, no upward import")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
