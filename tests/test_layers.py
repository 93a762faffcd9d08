"""The packages' import graph: no module cycles, and no package imports one of its own layer or above.

Layers, bottom up: the data model and the facts (``core``, ``hardware_profiles``), the judge (``fitness``), what
makes candidates (``operators``: variation operators; ``seeds``: seed sources), the search (``evo``), the config
schema (``conf``: it gathers each layer's settings classes into the commands' configs), the command (``kernelevo``).
Every import that can run counts: at module level, in class bodies and inside functions alike (an import deferred
into a function is still a dependency: the judge reaching ``conf`` from a function pulled the whole search in); only
``if TYPE_CHECKING:`` blocks, which never run, are left out. The graph is read from the source with ``ast``; nothing
is imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = [("core", "hardware_profiles"), ("fitness",), ("operators", "seeds"), ("evo",), ("conf",), ("kernelevo",)]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in {getattr(node.test, "id", None),
                                                             getattr(node.test, "attr", None)}


def _imports(tree):
    """Every import statement in `tree` that can run: module level, class bodies, functions (not under
    ``if TYPE_CHECKING:``; its ``else`` does run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif _type_checking(node):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, packages) -> dict[str, set[str]]:
    """Module -> the project modules it imports, anywhere in it (a `from package import name` counts as the
    submodule `name` where there is one, else as the package)."""
    paths = {module_name(root, p): p for package in packages for p in (root / package).rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base for alias in node.names]
            for target in targets:
                while target and target not in paths:  # `import a.b.c` of a module a.b defines
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def upward(graph: dict[str, set[str]], layers) -> list[str]:
    """Imports of a package of the importer's own layer or above (other than its own package)."""
    level = {package: i for i, layer in enumerate(layers) for package in layer}
    wrong = []
    for importer, imported in sorted(graph.items()):
        mine = importer.split(".")[0]
        for target in sorted(imported):
            theirs = target.split(".")[0]
            if theirs != mine and level[theirs] >= level[mine]:
                wrong.append(f"{importer} imports {target}")
    return wrong


def project_packages() -> list[str]:
    return sorted(p.parent.name for p in REPO.glob("*/__init__.py") if p.parent.name not in ("tests", "experiments"))


def test_every_package_has_a_layer():
    placed = {package for layer in LAYERS for package in layer}
    assert set(project_packages()) == placed, "put a new top-level package in LAYERS, under what it may import"


def test_the_project_has_no_module_cycles():
    assert cycles(import_graph(REPO, project_packages())) == []


def test_no_package_imports_its_own_layer_or_above():
    assert upward(import_graph(REPO, project_packages()), LAYERS) == []


def _tree(root: Path, files: dict) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def toy(tmp_path):
    return _tree(tmp_path, {
        "low/__init__.py": "",
        "low/a.py": "from low import b\n",
        "low/b.py": "import low.c\n",
        "low/c.py": "import os\n",
        "high/__init__.py": "from .x import X\n",
        "high/x.py": "from typing import TYPE_CHECKING\nimport low.a\nif TYPE_CHECKING:\n    import high.y\nX = 1\n",
        "high/y.py": "class Y:\n    from high import x\n",
    })


def test_the_graph_counts_every_import_that_can_run(toy):
    graph = import_graph(toy, ["low", "high"])
    assert graph == {"low": set(), "low.a": {"low.b"}, "low.b": {"low.c"}, "low.c": set(),
                     "high": {"high.x"}, "high.x": {"low.a"}, "high.y": {"high.x"}}
    assert cycles(graph) == []
    (toy / "low/c.py").write_text("def f():\n    if True:\n        from low import a\n")  # runs when f is called
    (toy / "high/y.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import low.c\n"
                                   "else:\n    import low.b\n")
    graph = import_graph(toy, ["low", "high"])
    assert graph["low.c"] == {"low.a"} and graph["high.y"] == {"low.b"}
    assert cycles(graph) == [["low.a", "low.b", "low.c"]]


def test_a_cycle_and_an_upward_import_are_found(toy):
    (toy / "low/c.py").write_text("from low.a import f\n")
    (toy / "low/d.py").write_text("import high\n")
    graph = import_graph(toy, ["low", "high"])
    assert cycles(graph) == [["low.a", "low.b", "low.c"]]
    assert upward(graph, [("low",), ("high",)]) == ["low.d imports high"]
    assert upward(graph, [("low", "high")]) == ["high.x imports low.a", "low.d imports high"]  # peers: neither way


def test_the_judge_reads_the_config_folder_without_importing_the_search():
    """Issue 46: `fitness.comparison.policy.load_policy` and `operators.llm.check.presets` did `import conf` to find a
    YAML folder, and `conf` registers the schema, which imports every layer: loading a policy pulled in the search. They
    find the folder without running `conf`'s `__init__` (core.resources)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys; from fitness.comparison.policy import available_policies, load_policy; "
            "from operators.llm.check import presets; "
            "print(json.dumps([load_policy('strict-fp32').name, available_policies(), presets(), "
            "sorted({m.split('.')[0] for m in sys.modules} & {'conf', 'evo', 'kernelevo', 'hydra'})]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    policy, policies, presets, imported = json.loads(done.stdout)
    assert imported == [] and policy == "strict-fp32"
    assert policies == sorted(p.stem for p in (REPO / "conf/fitness/policy").glob("*.yaml"))
    assert presets == sorted(p.stem for p in (REPO / "conf/llm").glob("*.yaml") if p.stem != "none") != []
