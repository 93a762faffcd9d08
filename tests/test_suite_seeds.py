"""Every bundled seed kernel passes the full evaluator (5 trials, all guards) at its CPU test sizes."""
import pytest

from conftest import make_evaluator
from fitness.problem import resolve_problem, suite_names


@pytest.mark.parametrize("name", suite_names())
def test_seed_passes(name):
    with make_evaluator(problem=name, size_preset="test", trials=5, prestart_worker=False) as ev:
        result = ev.evaluate(resolve_problem(name).seed_source(), label="seed")
    assert result.status == "ok", f"{name}: {result.reason}\n{result.log_tail}"
    assert result.trials_passed == 5
    assert result.guards["triton_launches"] >= 1 and result.guards["torch_compute_ops"] == []
    assert result.guards["param_sync"] in ("state_dict", "none")
