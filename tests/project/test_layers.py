"""The packages' import graph: no module cycles, and no package imports one of its own layer or above.

Layers, bottom up: the data model and the user errors' family (``core``), the facts (``hardware_profiles``), the
judge (``fitness``), what makes candidates (``operators``: variation operators; ``seeds``: seed sources), the search
(``evo``), the command (``kernelevo``, with its configuration as code, ``kernelevo.config``: the schema gathering each
layer's settings classes into the commands' configs; ``conf/`` holds Hydra's YAML alone, no module).
Every import that can run counts: at module level, in class bodies and inside functions alike (an import deferred
into a function is still a dependency: the judge reaching the config from a function pulled the whole search in); only
``if TYPE_CHECKING:`` blocks, which never run, are left out. The graph is read from the source with ``ast``; nothing
is imported.

Inside ``evo`` and ``fitness`` the subpackages are ordered too (SUBLAYERS, bottom up, as docs/architecture.md's
tables are): a subpackage imports only those below it and its layer's root modules (the settings, which
import none of them), so the subpackages cannot import each other in a cycle either.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO

LAYERS = [("kernelevo.core",), ("hardware_profiles",), ("fitness",), ("operators", "kernelevo.seeds"), ("evo",),
          ("kernelevo",)]
# packages under the project's namespace that are layers of their own (issue 67: no generic top-level `core`,
# `seeds` in site-packages)
NAMESPACED = ("kernelevo.core", "kernelevo.seeds")
SUBLAYERS = {  # bottom up; the layer's root modules (ROOT_MODULES) sit below them all
    # benchmark above runs: the bench drives runs (each a `kernelevo run` process), a run never imports the bench
    "evo": ["records", "service", "tuning", "evolution", "reports", "runs", "benchmark"],
    # suite: the bundled problems (data: each problem and seed imports nothing of fitness)
    "fitness": ["suite", "common", "comparison", "problems", "measure", "judge", "workers", "evaluation"],
}
# what may live at a layer's root: its settings (kernelevo/config/schema.py reads them) and evo's plan made of them
# (issue 46)
ROOT_MODULES = {"evo": {"evo", "evo.settings", "evo.plan"}, "fitness": {"fitness", "fitness.settings"}}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in {getattr(node.test, "id", None),
                                                             getattr(node.test, "attr", None)}


def _imports(tree, type_checking: bool = False):
    """Every import statement in `tree` that can run: module level, class bodies, functions (not under
    ``if TYPE_CHECKING:``, its ``else`` does run; `type_checking`: those too, what a type checker reads)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif _type_checking(node) and not type_checking:
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, packages, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports, anywhere in it (a `from package import name` counts as the
    submodule `name` where there is one, else as the package); `type_checking`: ``if TYPE_CHECKING:`` imports too."""
    paths = {module_name(root, p): p for package in packages for p in (root / package).rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), type_checking):
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


def package_of(module: str) -> str:
    """The layer's package a module belongs to: its top-level package, or one of NAMESPACED."""
    return next((p for p in NAMESPACED if module == p or module.startswith(p + ".")), module.split(".")[0])


def upward(graph: dict[str, set[str]], layers) -> list[str]:
    """Imports of a package of the importer's own layer or above (other than its own package)."""
    level = {package: i for i, layer in enumerate(layers) for package in layer}
    wrong = []
    for importer, imported in sorted(graph.items()):
        mine = package_of(importer)
        for target in sorted(imported):
            theirs = package_of(target)
            if theirs != mine and level[theirs] >= level[mine]:
                wrong.append(f"{importer} imports {target}")
    return wrong


def sublayer(module: str, sublayers) -> tuple[str, int] | None:
    """(package, rank) of a module of a package ordered in `sublayers`: its subpackage's place, -1 at the root."""
    parts = module.split(".")
    if parts[0] not in sublayers:
        return None
    if len(parts) > 2 and parts[1] in sublayers[parts[0]]:
        return parts[0], sublayers[parts[0]].index(parts[1])
    return parts[0], -1


def sideways(graph: dict[str, set[str]], sublayers) -> list[str]:
    """Imports between subpackages of one package that are not strictly downward in its order (`sublayers`);
    a module at the package's root imports no subpackage."""
    wrong = []
    for importer, imported in sorted(graph.items()):
        mine = sublayer(importer, sublayers)
        for target in sorted(imported):
            theirs = sublayer(target, sublayers)
            if mine is None or theirs is None or mine[0] != theirs[0]:
                continue
            same = importer.split(".")[1:2] == target.split(".")[1:2] or mine[1] == theirs[1] == -1
            if not same and theirs[1] >= mine[1]:
                wrong.append(f"{importer} imports {target}")
    return wrong


def subpackage_graph(graph: dict[str, set[str]], sublayers) -> dict[str, set[str]]:
    """The graph of the subpackages (and root modules) of the ordered packages: an edge where any module imports."""
    def node(module):
        parts = module.split(".")
        return ".".join(parts[:2]) if sublayer(module, sublayers) is not None else None
    collapsed: dict[str, set[str]] = {}
    for importer, imported in graph.items():
        if (source := node(importer)) is not None:
            collapsed.setdefault(source, set()).update(
                t for t in map(node, imported)
                if t is not None and t != source and t.split(".")[0] == source.split(".")[0])
    return collapsed


def project_packages() -> list[str]:
    return sorted(p.parent.name for p in REPO.glob("*/__init__.py") if p.parent.name not in ("tests", "experiments"))


def test_every_package_has_a_layer():
    placed = {package for layer in LAYERS for package in layer}
    assert set(project_packages()) | set(NAMESPACED) == placed, "put a new top-level package in LAYERS, under what it may import"


def test_the_project_has_no_module_cycles():
    assert cycles(import_graph(REPO, project_packages())) == []


def test_no_package_imports_its_own_layer_or_above():
    assert upward(import_graph(REPO, project_packages()), LAYERS) == []


def test_every_subpackage_has_a_place_and_the_roots_hold_only_settings():
    for package, order in SUBLAYERS.items():
        found = sorted({p.relative_to(REPO / package).parts[0] for p in (REPO / package).glob("*/**/*.py")})
        assert found == sorted(order), f"put a new subpackage of {package}/ in SUBLAYERS, above what it imports"
        roots = {module_name(REPO, p) for p in (REPO / package).glob("*.py")}
        stray = sorted(roots - ROOT_MODULES[package])
        assert stray == [], f"{stray}: a module of {package}/ lives in the subpackage that owns it (its __init__)"


def test_the_subpackages_import_only_downward_and_have_no_cycle():
    graph = import_graph(REPO, project_packages())
    assert sideways(graph, SUBLAYERS) == []
    assert cycles(subpackage_graph(graph, SUBLAYERS)) == []


def test_a_run_never_imports_the_bench_that_drives_it():
    """Issue 67: ``evo.runs.run`` imported ``evo.benchmark.start_gate``, the run below the bench that drives it
    importing it. The run side of what the two share (the start gate, the failure record) lives with the run."""
    graph = import_graph(REPO, project_packages())
    assert [f"{a} imports {b}" for a, found in sorted(graph.items()) if a.startswith("evo.runs")
            for b in sorted(found) if b.startswith("evo.benchmark")] == []
    order = SUBLAYERS["evo"]
    assert order.index("runs") < order.index("benchmark")  # so `sideways` refuses any such import too


def test_the_command_has_no_cycle_even_among_its_type_checking_imports():
    """Issue 67: ``kernelevo.plans`` imported ``kernelevo.benching`` (the bench's settings, its rerun check) and
    ``kernelevo.benching`` took ``BenchPlan`` from ``kernelevo.plans`` under ``TYPE_CHECKING``: a circle a type
    checker reads. The bench's plan lives with the bench now, above the plans it is made of."""
    assert cycles(import_graph(REPO, ["kernelevo"], type_checking=True)) == []


def test_not_even_a_type_checking_import_goes_up_sideways_or_round():
    """Issue 67: ``kernelevo.core.individual`` took the evaluation's record from the judge (``fitness.measure.result``)
    under
    ``TYPE_CHECKING``: the data model reaching up for its own field's type. The record lives on the ground floor
    (``kernelevo.core.evaluation_record``); what a type checker reads keeps the layers' order too."""
    graph = import_graph(REPO, project_packages(), type_checking=True)
    assert upward(graph, LAYERS) == [] and sideways(graph, SUBLAYERS) == []
    assert cycles(graph) == []


def test_the_tuner_reads_a_profiles_tiles_not_a_seed_source():
    """Issue 67: ``evo.tuning.tuner`` took ``tile_starts`` from ``kernelevo.seeds.inductor.templates``: the search's
    tuner tied
    to one seed source. A profile's tiles and how they go on a genome's parameters are the profile's
    (``hardware_profiles.tiles``)."""
    graph = import_graph(REPO, project_packages(), type_checking=True)
    assert [f"{a} imports {b}" for a, found in sorted(graph.items()) if a.startswith("evo.tuning")
            for b in sorted(found) if b.startswith("kernelevo.seeds")] == []


def test_the_reports_read_records_and_judge_nothing():
    """Issue 67: ``evo.reports.full_size`` and ``sizes_label`` judged kernels again (evaluators, sandboxes) from the
    reports package. The check at other sizes lives with the run (``evo.runs.other_sizes``); the reports read its
    record (``evo.reports.sizes_record``) and reach no evaluator, sandbox, judge or seed source."""
    graph = import_graph(REPO, project_packages(), type_checking=True)
    judging = ("fitness.evaluation", "fitness.workers", "fitness.judge", "kernelevo.seeds")
    assert [f"{a} imports {b}" for a, found in sorted(graph.items()) if a.startswith("evo.reports")
            for b in sorted(found) if b.startswith(judging)] == []


def test_each_subpackage_says_what_it_owns_and_the_order_is_written_once():
    """Each subpackage's ``__init__`` says what it owns and that it imports only the subpackages below it; the order
    itself lives in docs/architecture.md (its package's table, bottom up) and in SUBLAYERS here, which agree."""
    docs = (REPO / "docs" / "architecture.md").read_text()
    for package, order in SUBLAYERS.items():
        packages = [name for name in order if name != "suite"]  # fitness.suite: data, the bundled problems
        for name in packages:
            doc = ast.get_docstring(ast.parse((REPO / package / name / "__init__.py").read_text())) or ""
            doc = " ".join(doc.split())
            assert doc.startswith("Owns ") and "imports only the subpackages below it" in doc, name
            assert "docs/architecture.md" in doc and ", ".join(packages[:3]) not in doc, name  # not repeated
        section = docs.split(f"\n## {package}/:", 1)[1].split("\n## ", 1)[0]
        assert re.findall(r"^\| `(\w+)/` \|", section, re.M) == packages, f"docs/architecture.md's {package}/ table"


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


def test_an_upward_or_circular_import_between_subpackages_is_found(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "", "pkg/settings.py": "", "pkg/plan.py": "from pkg import settings\n",  # roots: peers
        "pkg/low/__init__.py": "", "pkg/low/a.py": "from pkg import settings\n",
        "pkg/high/__init__.py": "", "pkg/high/b.py": "from pkg.low import a\n",
    })
    order = {"pkg": ["low", "high"]}
    graph = import_graph(root, ["pkg"])
    assert sideways(graph, order) == [] and cycles(subpackage_graph(graph, order)) == []
    (root / "pkg/low/c.py").write_text("def f():\n    from pkg.high.b import a\n")  # upward, inside a function
    (root / "pkg/settings.py").write_text("import pkg.low.a\n")  # a root module importing a subpackage
    graph = import_graph(root, ["pkg"])
    assert sideways(graph, order) == ["pkg.low.c imports pkg.high.b", "pkg.settings imports pkg.low.a"]
    assert cycles(subpackage_graph(graph, order)) == [["pkg.high", "pkg.low", "pkg.settings"]]


def test_the_judge_reads_the_config_folder_without_importing_the_search():
    """Issue 46: `fitness.comparison.policy.load_policy` and `operators.llm.check.presets` did `import conf` to find a
    YAML folder, and `conf` registers the schema, which imports every layer: loading a policy pulled in the search.
    Issue 67: each reads its own package's folder (fitness/comparison/policies/, operators/llm/presets/), which the
    config registers as its groups (kernelevo.config.groups): nothing below the command reaches up into conf/."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json, sys; from fitness.comparison.policy import available_policies, load_policy; "
            "from operators.llm.check import presets; "
            "print(json.dumps([load_policy('strict-fp32').name, available_policies(), presets(), "
            "sorted({m for m in sys.modules if m.split('.')[0] in ('conf', 'evo', 'hydra') or m.startswith('kernelevo.') "
            "and not m.startswith(('kernelevo.core', 'kernelevo.seeds'))})]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    policy, policies, presets, imported = json.loads(done.stdout)
    assert imported == [] and policy == "strict-fp32"
    assert policies == sorted(p.stem for p in (REPO / "fitness/comparison/policies").glob("*.yaml"))
    assert presets == sorted(p.stem for p in (REPO / "operators/llm/presets").glob("*.yaml") if p.stem != "none") != []


def test_conf_holds_hydras_yaml_alone_and_nothing_below_the_command_reads_it():
    """Issue 67: ``conf/`` held code (the schema, the plug-ins' nodes, the plan builder, resolvers, a patch of Hydra's
    ConfigStore) above ``evo/``, and the judge and the operators read its YAML. It holds Hydra's YAML alone now; the
    code is ``kernelevo.config``, and no module below the command names a file of ``conf/``'s."""
    assert sorted({p.suffix for p in (REPO / "conf").rglob("*") if p.is_file() and "__pycache__" not in p.parts}) \
        == [".yaml"]
    below = [p for package in project_packages() for p in (REPO / package).rglob("*.py")
             if package_of(module_name(REPO, p)) != "kernelevo"]
    found = [str(p.relative_to(REPO)) for p in below if re.search(r"""package_folder|["']conf["']""", p.read_text())]
    assert found == []
