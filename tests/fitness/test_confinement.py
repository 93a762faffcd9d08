"""The operating system confines every candidate (fitness/workers/confine.py): it cannot see the search's processes or
read their environment, has no network, writes nowhere but its own directory, and nothing it starts outlives its
evaluation. The static check is off in these tests: they show what the OS enforces when a candidate gets past it.
Each attack runs at import and reports what it managed in the exception it raises (the result's reason)."""
import os
import re
import signal
import socket
import threading
import time
import uuid

import pytest

from conftest import alive, candidate, make_evaluator, processes_under
from fitness.workers.confine import UID_BASE, UID_SPAN

SECRET = "sk-search-process-secret-0123456789"


def attack(body: str) -> str:
    """The good candidate, then `body` at import; `body` appends what it found to `found`, which is raised."""
    return candidate("good") + "\n\nfound = []\n" + body + "\nraise RuntimeError('REPORT ' + ' | '.join(found))\n"


def report_of(result) -> str:
    assert "REPORT" in result.reason, result.reason
    return result.reason.split("REPORT", 1)[1]


@pytest.fixture
def evaluator(sandbox):
    """Its jobs in the pytest worker's fork server (conftest's `sandbox`): what is confined is each forked worker."""
    with make_evaluator(static_check=False, trials=1, timeout_s=60, sandbox=sandbox) as ev:
        yield ev


def test_a_candidate_sees_only_its_own_processes_and_not_the_search_environment(evaluator, monkeypatch):
    monkeypatch.setenv("KERNELEVO_TEST_API_KEY", SECRET)  # in the search's environment, as a provider key would be
    body = f"""
import os
import signal
found.append('pid %d pids %s' % (os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit())))
for pid in ({os.getpid()}, os.getppid()):
    try:
        found.append('environ of %d: %d bytes' % (pid, len(open('/proc/%d/environ' % pid, 'rb').read())))
    except OSError as exc:
        found.append('no environ of %d: %s' % (pid, type(exc).__name__))
"""
    text = report_of(evaluator.evaluate(attack(body)))
    assert text.strip().startswith("pid 1 pids [1")  # PID 1 of its own namespace; /proc shows no host process
    assert f"no environ of {os.getpid()}" in text and "bytes" not in text


def test_a_candidate_has_no_network(evaluator):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    body = f"""
import socket
import threading
try:
    socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=2)
    found.append('connected')
except OSError as exc:
    found.append('refused: %s' % type(exc).__name__)
"""
    try:
        text = report_of(evaluator.evaluate(attack(body)))
    finally:
        server.close()
    assert "refused" in text and "connected" not in text


def test_a_candidate_writes_nowhere_but_its_own_directory(evaluator, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    body = f"""
import os
import signal
for path in ({str(outside / 'planted.py')!r}, os.path.expanduser('~/../planted.txt'), 'mine.txt', '/dev/shm/x'):
    try:
        open(path, 'w').write('x')
        found.append('wrote ' + os.path.basename(path))
    except OSError as exc:
        found.append('denied %s: %s' % (os.path.basename(path), exc.strerror))
"""
    text = report_of(evaluator.evaluate(attack(body)))
    assert not (outside / "planted.py").exists() and "denied planted.py" in text and "denied planted.txt" in text
    assert "wrote mine.txt" in text and "wrote x" in text  # its own directory, and a private /dev/shm


def test_a_candidate_has_its_own_proc_with_kernel_settings_read_only(evaluator):
    """/proc stays writable (CUDA fails to start with error 304 on a read-only /proc) but is the worker's own, and
    its kernel-wide parts (/proc/sys, sysrq-trigger) are read-only mounts: no sysctl even for a worker still root."""
    body = """
for line in open('/proc/self/mountinfo'):
    fields = line.split()
    if fields[4] in ('/proc', '/proc/sys', '/proc/sysrq-trigger'):
        found.append('%s=%s' % (fields[4], fields[5].split(',')[0]))
"""
    mounts = dict(re.findall(r"(/proc[\w/-]*)=(r[ow])", report_of(evaluator.evaluate(attack(body)))))
    assert mounts.get("/proc") == "rw" and mounts.get("/proc/sys") == "ro", mounts
    assert mounts.get("/proc/sysrq-trigger", "ro") == "ro", mounts  # where the kernel has one


def test_nothing_a_candidate_starts_outlives_its_evaluation(evaluator):
    token = f"kernelevo-survivor-{uuid.uuid4().hex}"
    body = f"""
import subprocess, sys
proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', '{token}'], start_new_session=True)
found.append('started')
"""
    assert "started" in report_of(evaluator.evaluate(attack(body)))
    time.sleep(0.5)
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                survivors.append(pid)
        except OSError:
            pass
    assert survivors == []  # its own session did not save it: the namespace died with the worker


def test_the_worker_records_what_confined_it(evaluator, monkeypatch):
    outcomes = []
    run = evaluator._sandbox.run

    def recording(job, *args, **kwargs):
        outcomes.append((job.kind, run(job, *args, **kwargs)))
        return outcomes[-1][1]

    monkeypatch.setattr(evaluator._sandbox, "run", recording)  # the shared sandbox's, for this test only
    assert evaluator.evaluate(candidate("good")).ok
    (outcome,) = [outcome for kind, outcome in outcomes if kind == "candidate"]  # a GPU adds baseline jobs
    confinement = outcome.result["worker"]["confinement"]
    assert set(confinement["enforced"]) >= {"pid", "mount", "network", "filesystem", "limits", "user"}, confinement
    assert not confinement["missing"]


def test_a_candidate_runs_as_a_user_of_its_own_within_limits(evaluator, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    private = shared / "credentials"
    private.write_text(SECRET)
    private.chmod(0o600)  # readable by its owner only, as a key file would be
    body = f"""
import os, resource
found.append('uid %d groups %s' % (os.getuid(), os.getgroups()))
try:
    found.append('read ' + open({str(private)!r}).read())
except OSError as exc:
    found.append('denied: %s' % exc.strerror)
for name in ('NPROC', 'CPU', 'FSIZE', 'CORE'):
    found.append('%s %d' % (name, resource.getrlimit(getattr(resource, 'RLIMIT_' + name))[0]))
"""
    text = report_of(evaluator.evaluate(attack(body)))
    uid = int(text.split("uid ", 1)[1].split()[0])
    assert uid != 0, text  # root's workers take a uid of their own
    assert "denied: Permission denied" in text and SECRET not in text
    assert "CORE 0" in text and "CPU 3600" in text
    if os.getuid() == 0:
        assert "NPROC 1024" in text and "groups []" in text


def worker_processes() -> dict[int, str]:
    """Live (not zombie) processes below this one running as one of the workers' own user ids: pid -> start time.
    Only this process's own: another run's workers on the same host are none of these tests' business."""
    found = {}
    for pid, (_, start) in processes_under(os.getpid()).items():
        try:
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
            uid, state = int(status["Uid"].split()[0]), status["State"].split()[0]
        except (OSError, KeyError, ValueError):
            continue
        if UID_BASE <= uid < UID_BASE + UID_SPAN and state != "Z":
            found[pid] = start
    return found


def workers_while(evaluation: threading.Thread, until=lambda seen: False, wait_s: float = 60.0) -> dict[int, str]:
    """The worker processes seen while `evaluation` runs, until it ends or `until(seen)` holds."""
    seen, deadline = {}, time.time() + wait_s
    evaluation.start()
    while evaluation.is_alive() and not until(seen) and time.time() < deadline:
        seen.update(worker_processes())
        time.sleep(0.05)
    return seen


def survivors(workers: dict[int, str], wait_s: float = 10.0) -> list[int]:
    """Those of `workers` (pid -> start time) still alive after up to `wait_s` (a kill takes a moment to land)."""
    deadline = time.time() + wait_s
    while (left := [pid for pid, start in workers.items() if alive(pid, start)]) and time.time() < deadline:
        time.sleep(0.2)
    return left


def test_a_worker_killed_at_its_timeout_leaves_no_process_behind():
    with make_evaluator(static_check=False, trials=1, timeout_s=8) as ev:
        results = []
        evaluation = threading.Thread(target=lambda: results.append(
            ev.evaluate(candidate("good") + "\nwhile True:\n    pass\n")))
        seen = workers_while(evaluation)
        evaluation.join(60)
        assert results and results[0].status == "timeout", results and results[0].reason
        assert seen, "no worker ran under its own user id"
        assert survivors(seen) == []


def test_a_worker_dies_with_its_fork_server():
    with make_evaluator(static_check=False, trials=1, timeout_s=120) as ev:
        evaluation = threading.Thread(target=ev.evaluate, args=(candidate("good") + "\nwhile True:\n    pass\n",))
        seen = workers_while(evaluation, until=bool)
        assert seen, "the worker never switched to its own user id"
        os.kill(ev._sandbox.zygote_pid, signal.SIGKILL)  # the fork server dies mid-job
        evaluation.join(60)
        assert survivors(seen) == []  # its own user id did not save it: it died with its parent
