"""The tests' fakes stand for what they fake: each implements its protocol
(``fitness.evaluation.evaluating.Evaluating``, ``evo.service.evaluation_protocol.RunEvaluator``, ``Evaluations``) -- an
isinstance check with the runtime-checkable protocol, and every call's parameters as the protocol names them -- and so
do the real evaluators and the service, so a fake and a backend cannot drift apart. Tests import fakes from
tests/fakes.py, never each other."""
import ast
import inspect
from types import SimpleNamespace

import pytest

from conftest import TESTS, make_evaluator
from evo.service.evaluation import EvaluationService, LocalEvaluator
from evo.service.evaluation_protocol import Evaluations, RunEvaluator
from evo.service.evaluation_ray import RemoteEvaluator
from evo.service.replay import RecordedEvaluator
from evo.records.store import RunStore
from fakes import FakeEvaluator, FakeService, LandscapeService, PacedEvaluator, toy_verdict
from fitness.evaluation.evaluating import Evaluating
from fitness.evaluation.evaluator import Evaluator



def calls(protocol) -> dict[str, inspect.Signature]:
    """The protocol's methods (properties and data members left out) and their signatures."""
    return {name: inspect.signature(member) for name, member in vars(protocol).items()
            if inspect.isfunction(member) and not name.startswith("_")}


def parameters(signature: inspect.Signature) -> list[tuple]:
    """(name, kind, default) of each parameter but `self`: what a caller may pass and how."""
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


def mismatches(implementation: type, protocol) -> list[str]:
    """The protocol's calls whose parameters the implementation names or defaults otherwise."""
    wrong = []
    for cls in protocol.__mro__:
        for name, wanted in calls(cls).items() if cls.__module__ not in ("typing", "builtins") else ():
            got = inspect.signature(getattr(implementation, name))
            if parameters(got) != parameters(wanted):
                wrong.append(f"{implementation.__name__}.{name}{got} is not {protocol.__name__}.{name}{wanted}")
    return wrong


FAKE_EVALUATORS = [FakeEvaluator(), FakeEvaluator(toy_verdict, on_gpu=True), PacedEvaluator()]
FAKE_SERVICES = [FakeService(), LandscapeService(), FakeService(evaluators=[FakeEvaluator()])]


@pytest.mark.parametrize("fake", FAKE_EVALUATORS, ids=lambda f: type(f).__name__)
def test_each_fake_evaluator_is_a_run_evaluator_with_its_calls(fake):
    assert isinstance(fake, Evaluating) and isinstance(fake, RunEvaluator)
    assert mismatches(type(fake), RunEvaluator) == []


@pytest.mark.parametrize("fake", FAKE_SERVICES, ids=lambda f: type(f).__name__)
def test_each_fake_service_is_the_evaluations_protocol_with_its_calls(fake):
    assert isinstance(fake, Evaluations)
    assert mismatches(type(fake), Evaluations) == []


def test_every_evaluator_and_the_service_implement_their_protocol(tmp_path):
    """The real ones: this host's evaluator (fitness) and the run's (evo), the driver's handle on a Ray actor (its
    facts as the actor sends them), the replay's, and the service over them."""
    with make_evaluator(prestart_worker=False) as judge:
        local = LocalEvaluator(judge.problem, judge.policy, judge.profile, judge.settings, device=judge.device,
                               sandbox=judge.sandbox)
        facts = {"device": judge.device, "on_gpu": judge.on_gpu, "profile": judge.profile, "target": judge.target,
                 "cost": judge.cost, "sol_s": judge.sol_s, "sizes_used": judge.sizes_used,
                 "describe": judge.describe(), "memory_slots": judge.memory_slots, "where": "Ray node 10.0.0.2"}
        remote = RemoteEvaluator(SimpleNamespace(), None, judge.problem, judge.policy, facts, None)
        store = RunStore(tmp_path / "record")
        recorded = RecordedEvaluator(local, store)
        service = EvaluationService([local, remote, recorded], RunStore(tmp_path / "run"), parallel=1)
        assert isinstance(judge, Evaluating) and not isinstance(judge, RunEvaluator)  # no compiler seeds there
        assert mismatches(Evaluator, Evaluating) == []
        for evaluator in (local, remote, recorded):
            assert isinstance(evaluator, RunEvaluator), type(evaluator).__name__
            assert mismatches(type(evaluator), RunEvaluator) == []
        assert remote.sandbox is None and recorded.sandbox is local.sandbox is judge.sandbox
        assert isinstance(service, Evaluations) and mismatches(EvaluationService, Evaluations) == []
        store.close()
        service.store.close()


def test_a_recorded_evaluator_answers_as_its_protocol_says(tmp_path):
    """The replay's evaluator takes its facts from the problem's evaluator (no __getattr__ forwarding)."""
    store = RunStore(tmp_path / "record")
    recorded = RecordedEvaluator(FakeEvaluator(toy_verdict), store)
    try:
        assert isinstance(recorded, RunEvaluator) and mismatches(RecordedEvaluator, RunEvaluator) == []
        assert (recorded.device, recorded.on_gpu, recorded.sandbox, recorded.baseline()) == ("cpu", False, None, None)
        assert recorded.describe().startswith(f"replaying the measurements of {tmp_path / 'record'}")
    finally:
        recorded.close()


def test_a_service_over_fakes_is_the_evaluations_protocol_and_hands_them_the_cut(tmp_path):
    store = RunStore(tmp_path / "run")
    fakes = [FakeEvaluator(), PacedEvaluator(hold_s=0.0)]
    service = EvaluationService(fakes, store, parallel=2)
    try:
        assert isinstance(service, Evaluations)
        service.cut_at(12.5)
        assert [f.cut for f in fakes] == [12.5, 12.5]  # every evaluator is told, whatever it is
    finally:
        service.close()
        store.close()
    assert all(f.closed for f in fakes)


def test_tests_import_shared_fakes_never_each_other():
    """No test module imports another (at module level or inside a test): shared fakes and helpers live in
    tests/fakes.py, tests/llm_fakes.py (the LLM tests') and tests/conftest.py."""
    imports = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            imports += [f"{path.relative_to(TESTS)}: {name}" for name in names if name.startswith("test_")]
    assert imports == []
