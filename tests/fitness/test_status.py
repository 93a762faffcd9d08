"""An evaluation's status (``kernelevo.core.evaluation_record.Status``): every status a producer writes is a member, an
unknown
one is a bug refused by name, and a record keeps its on-disk form (to_dict, JSON, the run store) as before the enum."""
import json
import re
import sqlite3

import pytest

from conftest import REPO
from evo.records.store import DB_NAME, RunStore
from fitness.judge.candidate import CandidateError, classify_exception
from fitness.judge.checks import Verdict
from kernelevo.core.evaluation_record import (COMPILE_FAILURES, NO_VERDICT, STATUSES, TIMED_OUT, EvalResult,
                                              ProblemCost,
                                    Status)
from fitness.measure.result import WorkerResult

PRODUCT = ("core", "fitness", "operators", "seeds", "evo", "kernelevo")
# where a status is written as a literal: a verdict raised, a record made, a worker's result, a status set
WRITTEN = [r'\b(?:Verdict|CandidateError|EvalResult|WorkerResult)\(\s*(?:status=)?"([a-z_]+)"',
           r'"status":\s*"([a-z_]+)"', r'\bstatus="([a-z_]+)"', r'\.status(?:,\s*[\w.]+)*\s*=\s*"([a-z_]+)"']


def written_statuses() -> dict[str, list[str]]:
    """Each status literal a product module writes -> where (path:line)."""
    found: dict[str, list[str]] = {}
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text()
            for pattern in WRITTEN:
                for match in re.finditer(pattern, text):
                    line = text.count("\n", 0, match.start()) + 1
                    found.setdefault(match.group(1), []).append(f"{path.relative_to(REPO)}:{line}")
    return found


def test_every_status_a_producer_writes_is_a_member():
    found = written_statuses()
    assert {"ok", "rejected", "incorrect", "compile_error", "runtime_error"} <= set(found), found  # the scan sees them
    unknown = {status: where for status, where in found.items() if status not in {s.value for s in Status}}
    assert not unknown, f"statuses written that are not members of kernelevo.core.evaluation_record.Status: {unknown}"


def test_the_groups_are_members_and_the_enum_is_its_values():
    assert set(STATUSES) == set(Status) and all(isinstance(s, Status) for s in STATUSES)
    assert COMPILE_FAILURES | TIMED_OUT | NO_VERDICT <= set(Status)
    assert "compile_timeout" in COMPILE_FAILURES and "timeout" in TIMED_OUT and "cancelled" in NO_VERDICT
    assert Status.OK == "ok" and f"{Status.INFRASTRUCTURE}" == str(Status.INFRASTRUCTURE) == "infrastructure_error"
    assert json.dumps({"status": Status.TIMEOUT}) == '{"status": "timeout"}'


@pytest.mark.parametrize("make", [lambda: EvalResult("okay"), lambda: EvalResult.from_dict({"status": "okay"}),
                                  lambda: WorkerResult.from_dict({"status": "okay"}), lambda: Verdict("okay", "r"),
                                  lambda: CandidateError("okay", "r")], ids=["eval", "read", "worker", "verdict",
                                                                              "candidate"])
def test_an_unknown_status_is_refused_by_name(make):
    with pytest.raises(ValueError, match=r"unknown status 'okay'; one of \['ok', .*'cancelled'\]"):
        make()


def test_a_status_set_later_is_checked_too():
    result = EvalResult("ok")
    result.status = "rejected"  # as the evaluator sets a verdict: taken as the member
    assert result.status is Status.REJECTED and not result.ok
    with pytest.raises(ValueError, match="unknown status 'timed_out'"):
        result.status = "timed_out"
    assert result.status is Status.REJECTED


def test_producers_give_members():
    assert Verdict("incorrect", "trial 1").status is Status.INCORRECT
    assert classify_exception(NameError("x")) is Status.COMPILE_ERROR
    assert classify_exception(RuntimeError("x")) is Status.RUNTIME_ERROR
    assert WorkerResult.from_dict({"status": "runtime_error"}).status is Status.RUNTIME_ERROR


@pytest.mark.parametrize("status", [s.value for s in Status if s is not Status.INFRASTRUCTURE])
def test_a_record_round_trips_unchanged_through_to_dict_json_and_the_store(tmp_path, status):
    result = EvalResult(status, reason="why", problem="toy", sizes={"N": 8}, trials=3, trials_passed=2, time_s=1e-3)
    data = result.to_dict()
    assert type(data["status"]) is str and data["status"] == status  # the plain value, as before the enum
    assert EvalResult.from_dict(data) == result and EvalResult.from_dict(json.loads(result.to_json())) == result
    store = RunStore(tmp_path)
    store.add_evaluation("k", result)
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    column, text = db.execute("SELECT status, result FROM evaluations WHERE key = 'k'").fetchone()
    db.close()
    assert (column, json.loads(text)["status"]) == (status, status) and f'"status": "{status}"' in text
    read = RunStore(tmp_path, create=False).evaluation("k")
    assert read == result and read.status is Status(status)


def test_a_records_typed_cost_keeps_its_stored_form():
    """The cost model is a typed record (``ProblemCost``) in the evaluation's record; stored as before: its four
    fields, or {} where it is not known, and read back from either."""
    cost = ProblemCost(flops=2e6, bytes=4096, dtype="fp32", data_bytes=2048)
    known, unknown = EvalResult("ok", cost=cost), EvalResult("ok")
    assert known.to_dict()["cost"] == {"flops": 2e6, "bytes": 4096, "dtype": "fp32", "data_bytes": 2048}
    assert unknown.to_dict()["cost"] == {} and unknown.cost is None
    for result in (known, unknown):
        assert EvalResult.from_dict(json.loads(result.to_json())) == result
    assert EvalResult.from_dict({"status": "ok", "cost": {"flops": 1.0, "bytes": 8, "dtype": "bf16"}}).cost == \
        ProblemCost(1.0, 8, "bf16")  # before the data floor: no data_bytes


def test_an_older_stores_verdict_reads_as_a_member(tmp_path):
    """A verdict an older version stored (plain JSON, fewer fields) reads back; its status a member of its group."""
    RunStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    with db:
        db.execute("INSERT INTO evaluations VALUES (?, ?, ?, ?, ?)",
                   ("old", "compile_timeout", None, json.dumps({"status": "compile_timeout", "reason": "slow"}), 0.0))
    db.close()
    read = RunStore(tmp_path, create=False).evaluation("old")
    assert read.status is Status.COMPILE_TIMEOUT and read.status in COMPILE_FAILURES and read.reason == "slow"
