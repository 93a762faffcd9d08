"""The operating system confines every candidate (fitness/confine.py): it cannot see the search's processes or read
their environment, has no network, and nothing it starts outlives its evaluation. The static check is off in these
tests: they show what the OS enforces when a candidate gets past it. Each attack reports what it managed into a
file outside its own directory (the filesystem view is not confined yet), which the test reads."""
import os
import socket
import time

import pytest

from conftest import candidate, make_evaluator
from fitness.confine import confine  # noqa: F401 - importable on every platform the tests run on

SECRET = "sk-search-process-secret-0123456789"


def attack(body: str, report) -> str:
    """The good candidate with `body` run at import; `body` writes what it found with report(text)."""
    prelude = f"def report(text):\n    open({str(report)!r}, 'a').write(str(text) + '\\n')\n\n"
    return candidate("good") + "\n\n" + prelude + body + "\n"


@pytest.fixture
def evaluator():
    with make_evaluator(static_check=False, trials=1, timeout_s=60) as ev:
        yield ev


def test_a_candidate_sees_only_its_own_processes_and_not_the_search_environment(evaluator, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELEVO_TEST_API_KEY", SECRET)  # in the search's environment, as a provider key would be
    report = tmp_path / "report.txt"
    body = f"""
import os
report('pid %d pids %s' % (os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit())))
for pid in ({os.getpid()}, os.getppid()):
    try:
        report(open('/proc/%d/environ' % pid, 'rb').read())
    except OSError as exc:
        report('no environ of %d: %s' % (pid, type(exc).__name__))
"""
    result = evaluator.evaluate(attack(body, report))
    text = report.read_text()
    assert result.ok, result.reason
    assert SECRET not in text and "KERNELEVO_TEST_API_KEY" not in text
    assert text.startswith("pid 1 pids [1")  # PID 1 of its own namespace, and /proc shows no host process
    assert str(os.getpid()) not in text.splitlines()[0].split("pids")[1]


def test_a_candidate_has_no_network(evaluator, tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    report = tmp_path / "report.txt"
    body = f"""
import socket
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=2)
    report('connected')
except OSError as exc:
    report('refused: %s' % type(exc).__name__)
"""
    try:
        evaluator.evaluate(attack(body, report))
    finally:
        server.close()
    assert report.read_text().startswith("refused")


def test_nothing_a_candidate_starts_outlives_its_evaluation(evaluator, tmp_path):
    report, late = tmp_path / "report.txt", tmp_path / "late.txt"
    body = f"""
import subprocess
proc = subprocess.Popen(['sh', '-c', 'sleep 3; echo alive > {late}'], start_new_session=True)
report('started %d' % proc.pid)
"""
    evaluator.evaluate(attack(body, report))
    assert report.read_text().startswith("started")
    time.sleep(4)
    assert not late.exists()  # its own session did not save it: the namespace died with the worker


def test_the_worker_records_what_confined_it(evaluator):
    outcomes = []
    run = evaluator._sandbox.run

    def recording(job, *args, **kwargs):
        outcomes.append(run(job, *args, **kwargs))
        return outcomes[-1]

    evaluator._sandbox.run = recording
    assert evaluator.evaluate(candidate("good")).ok
    confinement = outcomes[-1].result["worker"]["confinement"]
    assert set(confinement["enforced"]) >= {"pid", "mount", "network", "limits"} and not confinement["missing"]
