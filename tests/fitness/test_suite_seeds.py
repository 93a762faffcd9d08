"""Every bundled seed kernel passes the full evaluator (5 trials, all guards) at its CPU test sizes, and at the other
sizes a run on the interpreter judges its best kernels at again (fitness.problems.sizes.other_sizes): the seeds are
size-generic."""
import pytest

from conftest import make_evaluator
from fitness.problems.problem import load_problem, resolve_problem, suite_names
from fitness.problems.sizes import other_sizes


@pytest.mark.parametrize("name", suite_names())
def test_seed_passes(name, sandbox):
    with make_evaluator(problem=name, size_preset="test", trials=5, sandbox=sandbox) as ev:
        result = ev.evaluate(resolve_problem(name).seed_source(), label="seed")
    assert result.status == "ok", f"{name}: {result.reason}\n{result.log_tail}"
    assert result.trials_passed == 5
    assert result.guards["triton_launches"] >= 1 and result.guards["torch_compute_ops"] == []
    assert result.guards["param_sync"] in ("state_dict", "none")


@pytest.mark.parametrize("name", suite_names())
def test_seed_passes_at_the_other_sizes(name, sandbox):
    other = other_sizes(load_problem(resolve_problem(name, size_preset="test")))
    assert other.changed and not other.unchanged
    with make_evaluator(problem=name, sizes=other.sizes, trials=2, sandbox=sandbox) as ev:
        result = ev.evaluate(resolve_problem(name).seed_source(), label="seed")
    assert result.status == "ok", f"{name} at {other.sizes}: {result.reason}\n{result.log_tail}"
