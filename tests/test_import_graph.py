"""No module-level import cycle among evo/, fitness/, operators/ and kernelevo/, and no upward import from the judge
(fitness/ never imports evo/, operators/ or kernelevo/ when it loads): scripts/import_graph.py, read as source."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "import_graph.py"
spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def test_the_packages_have_no_import_cycle_and_the_judge_imports_nothing_above_it():
    edges = import_graph.graph()
    assert "evo.run" in edges and "evo.outcome" in edges["evo.run"]  # the graph is read
    assert import_graph.cycles(edges) == [] and import_graph.upward(edges) == []


def test_a_cycle_and_an_upward_import_are_named():
    edges = {"evo.a": {"evo.b"}, "evo.b": {"evo.c"}, "evo.c": {"evo.a"}, "fitness.x": {"evo.a"}}
    assert import_graph.cycles(edges) == [["evo.a", "evo.b", "evo.c"]]
    assert import_graph.upward(edges) == ["fitness.x imports evo.a"]
