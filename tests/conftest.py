"""Test set-up: no GPU here, so kernels run on the CPU through Triton's interpreter.

TRITON_INTERPRET must be set before triton is imported anywhere in this process; evaluation workers get it
from the sandbox. On a GPU machine, `KERNELEVO_TEST_DEVICE=cuda` runs the evaluator tests' candidates (the attacks
included) on the GPU instead; tests that assert interpreter-only behaviour then fail by design.
"""
import atexit
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

DEVICE = os.environ.get("KERNELEVO_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"

# Hermetic: this process and every command it starts get a home and caches of their own, removed at the end, so the
# suite writes nothing into the user's ~/.cache/kernelevo, ~/.triton, /tmp/torchinductor_$USER or /tmp/ray (and reads
# no seeds cached there by an older version). Set before anything below is imported.
# pytest-xdist's workers share the home their controller made (Inductor's seeds are computed once).
REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
if "KERNELEVO_TEST_HOME" not in os.environ:
    os.environ["KERNELEVO_TEST_HOME"] = tempfile.mkdtemp(prefix="kevo-tests-")  # short: Ray puts sockets in it
    atexit.register(shutil.rmtree, os.environ["KERNELEVO_TEST_HOME"], ignore_errors=True)
SESSION_HOME = Path(os.environ["KERNELEVO_TEST_HOME"])
os.environ.update(HOME=str(SESSION_HOME), XDG_CACHE_HOME=str(SESSION_HOME / ".cache"),
                  TRITON_CACHE_DIR=str(SESSION_HOME / "triton"),
                  TORCHINDUCTOR_CACHE_DIR=str(SESSION_HOME / "torchinductor"),
                  MPLCONFIGDIR=str(SESSION_HOME / "matplotlib"),
                  # Inductor compiles a capture's few kernels in its own process: its pool of compile workers would
                  # start a process importing torch again per capture (about 5 s of CPU each here, for the same code)
                  TORCHINDUCTOR_COMPILE_THREADS="1",
                  # each pytest-xdist worker its own: `address=auto` joins the local Ray found there
                  RAY_TMPDIR=str(SESSION_HOME / os.environ.get("PYTEST_XDIST_WORKER", "ray")))
# torch on one thread in this process and every one it starts (unless the caller chose): the suite's pytest-xdist
# workers already keep the cores busy, and a second OpenMP thread per process only waits for its turn on them
# (the judge's tests on four workers: about a third less CPU; docs/development.md)
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from kernelevo.core.log import configure as configure_logging  # noqa: E402
from fitness.evaluation.evaluator import EvalSettings, Evaluator  # noqa: E402
from fitness.comparison.policy import load_policy  # noqa: E402
from fitness.problems.problem import resolve_problem  # noqa: E402
from hardware_profiles import load_profile, resolve_profile  # noqa: E402

configure_logging()  # the "[kernelevo] ..." lines of what the tests call in-process, as the command prints them

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
CANDIDATES = TESTS / "candidates"
PROBLEMS = TESTS / "problems"
SCALE_SHIFT = str(PROBLEMS / "scale_shift.py")
FIXTURES = TESTS / "fixtures" / "inductor"  # torch.compile's captures on an H100, kept as files
TINY = ["search=tiny", "fitness.trials=2", "fitness.timing.interpreter_reps=1"]  # the smallest whole run


def candidate(name: str) -> str:
    return (CANDIDATES / f"{name}.py").read_text()


def make_evaluator(problem=SCALE_SHIFT, policy="triton", size_preset="full", sizes=None, sandbox=None,
                   **settings) -> Evaluator:
    """An evaluator of `problem` on the test device; its jobs run in `sandbox` (the `sandbox` fixture's) when given."""
    settings.setdefault("trials", 3)
    profile = load_profile("cpu_interpreter") if DEVICE == "cpu" else resolve_profile("auto")
    return Evaluator(resolve_problem(problem, sizes=sizes or {}, size_preset=size_preset), load_policy(policy),
                     profile, EvalSettings(**settings), device=DEVICE, sandbox=sandbox)


def kernelevo(*args, cwd, env=None, wait=True, timeout=600, process=False):
    """`kernelevo ARGS` as a user runs it, from `cwd` (kernels on the interpreter), `env` added to the environment.
    Returns the CompletedProcess (text output captured). It runs in this process (the command's `main`, its output
    captured; `os.environ`, the working directory and `sys.argv` restored after), which saves a `python` start and
    the torch, Hydra and litellm imports (seconds each) per call. A process of its own, output unbuffered, with
    `process=True` (what must differ in the interpreter: a module path, a Ray of its own) or, with wait=False, the
    Popen, stdout and stderr merged into its stdout pipe, in a session of its own (a kill, a Ctrl-C). `timeout`
    bounds a process; in this process pytest-timeout does."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    cmd = [sys.executable, "-m", "kernelevo.cli", *args]
    if not wait:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
    if process:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return _in_process(list(args), cwd, env)


def _in_process(args: list[str], cwd, env: dict) -> subprocess.CompletedProcess:
    """`kernelevo ARGS` through kernelevo.cli.main in this process, as `kernelevo` would end: its exit code, and an
    exception that escapes as a traceback on stderr with code 1."""
    import contextlib
    import io
    import traceback

    from kernelevo.cli import main

    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    out, err, code = io.StringIO(), io.StringIO(), 0
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["kernelevo"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if not isinstance(exc.code, int) and exc.code is not None:
                    print(exc.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - what the interpreter would print and exit with
                traceback.print_exc()
                code = 1
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
    return subprocess.CompletedProcess(["kernelevo", *args], code, out.getvalue(), err.getvalue())


# `kernelevo_in_one_process`'s process: each command through `_in_process`, the results written as JSON. Its path as
# pytest's (pyproject.toml: the repository, then tests/, whose folders named after the packages would otherwise be
# taken for them: namespace packages)
ONE_PROCESS = """
import json, sys
sys.path[:0] = sys.argv[1:3]
import conftest
done = [vars(conftest._in_process(args, sys.argv[3], dict(conftest.os.environ))) for args in json.loads(sys.argv[4])]
conftest.Path(sys.argv[5]).write_text(json.dumps(done))
"""


def kernelevo_in_one_process(*commands: list, cwd, timeout=900) -> list[subprocess.CompletedProcess]:
    """Several `kernelevo` commands (each its list of arguments), one after the other in one process of its own, each
    run as `kernelevo()` runs one in this process: one Python start and one import of torch and Ray for all of them,
    and one local Ray for their Ray runs (the first run starts it, the later ones join it: "Ray (already
    connected)"). For runs that need a process of their own (a Ray driver) but not one each."""
    results = Path(cwd) / ".kernelevo-results.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONUNBUFFERED": "1"}
    argv = [str(REPO), str(TESTS), str(cwd), json.dumps([list(c) for c in commands]), str(results)]
    proc = subprocess.run([sys.executable, "-c", ONE_PROCESS, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0 and results.is_file(), proc.stdout + proc.stderr
    return [subprocess.CompletedProcess(**done) for done in json.loads(results.read_text())]


def run_dir_of(output: str) -> Path:
    """The run directory a run's output names ("run dir PATH")."""
    line = next(line for line in output.splitlines() if "run dir " in line)
    return Path(line.split("run dir ", 1)[1].strip())


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """`kernelevo ARGS` run in this process from tmp_path, for a command refused before Hydra starts: (exit code,
    stdout, stderr)."""
    from kernelevo.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["kernelevo"])  # main sets it for Hydra

    def run(*args):
        with pytest.raises(SystemExit) as done:
            main(list(args))
        out = capsys.readouterr()
        return done.value.code, out.out, out.err
    return run


def read_store(run_dir, read):
    """What `read(store)` returns from a run's store, through its typed API (no SQL outside evo/records/store.py)."""
    from evo.records.store import RunStore

    store = RunStore(run_dir, create=False)
    try:
        return read(store)
    finally:
        store.close()


def log_counts(run_dir: Path) -> tuple[int, int]:
    return read_store(run_dir, lambda store: (store.evaluation_count(), store.distinct_evaluation_count()))


def assert_lineage_is_sound(individuals: list) -> None:
    """Every lineage ends at the seed, has no cycle, and each parent is of an earlier generation."""
    by_id = {ind.id: ind for ind in individuals}
    assert [ind.id for ind in individuals if not ind.parents] == ["0.0"]
    for ind in individuals:
        for parent in ind.parents:
            assert parent in by_id, f"{ind.id}: parent {parent} was never recorded"
            assert by_id[parent].generation < ind.generation, f"{ind.id} is not younger than its parent {parent}"
        current, seen = ind, set()
        while current.parents:
            assert current.id not in seen
            seen.add(current.id)
            current = by_id[current.parents[0]]
        assert current.id == "0.0"


def lineage_of(run_dir: Path) -> list[tuple]:
    return [(ind.id, ind.parents, ind.operator, ind.key, ind.status)
            for ind in read_store(run_dir, lambda store: store.individuals())]


def interruptible() -> None:
    """In the child before it starts: Ctrl-C as in a terminal, also when the suite itself runs where SIGINT is
    ignored (a background job: the shell sets SIG_IGN, children inherit it and Python then installs no handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def process_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, parent pid, ...; start time at 19), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def processes_under(root: int) -> dict[int, tuple[int, str]]:
    """The processes below `root` now (its descendants, whatever their session): pid -> (parent pid, start time),
    from the parent links in /proc; nothing outside `root`'s tree is kept."""
    table = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = process_stat(int(entry))
        if fields is not None:
            table[int(entry)] = (int(fields[1]), fields[19])
    found, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, start) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = (ppid, start)
                todo.append(pid)
    return found


def alive(pid: int, start: str) -> bool:
    """Whether that process (not a later one with its pid) still runs; a zombie has ended."""
    fields = process_stat(pid)
    return fields is not None and fields[19] == start and fields[0] != "Z"


def command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def replay_measurements(run_dir, into) -> dict:
    """A run's measurements (evaluation key -> result), stored into a new run directory `into`, so a second run there
    sees the same ones (timings on the interpreter are wall-clock noise)."""
    from evo.records.store import RunStore

    measured = read_store(run_dir, lambda store: store.evaluations())
    store = RunStore(into)
    try:
        for key, result in measured.items():
            store.add_evaluation(key, result)
    finally:
        store.close()
    return measured


def pytest_collection_modifyitems(config, items):
    """The files with the most `slow` tests run first, each file's tests in their order (module fixtures are made
    once per worker), so that pytest-xdist's workers (scripts/test.sh: `--dist worksteal`) start on the long tests
    and end sharing out short ones, not one worker finishing a long test alone. Ahead of them all, the files whose
    slow tests share a module fixture (a bench, a run): worksteal hands the first worker the head of the list and
    steals from its tail, so tests at the head are not split between workers, each making the fixture again. Tests
    marked `gpu` need a CUDA device (KERNELEVO_TEST_DEVICE=cuda): on the interpreter they are skipped."""
    slow, shared = {}, {}
    for item in items:
        name = item.module.__name__
        slow[name] = slow.get(name, 0) + ("slow" in item.keywords)
        if "slow" in item.keywords:
            for fixture in _module_fixtures(item):
                shared[name, fixture] = shared.get((name, fixture), 0) + 1
    first = {name for (name, _), users in shared.items() if users > 1}
    # stable: files and tests keep their order otherwise
    items.sort(key=lambda item: (item.module.__name__ not in first, -slow[item.module.__name__]))
    if DEVICE == "cpu":
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.skip(reason="needs a GPU: run with KERNELEVO_TEST_DEVICE=cuda"))


def _module_fixtures(item) -> list[str]:
    """The module-scoped fixtures a test uses (pytest's fixture closure; none where a pytest keeps it elsewhere)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {})
    return [name for name, chain in defs.items() if chain and chain[-1].scope == "module"]


@pytest.fixture(scope="session")
def sandbox():
    """One sandbox (one fork server, no spares) for the evaluators of the tests of a pytest worker that ask for it,
    which pass it to make_evaluator: for tests that judge kernels alone, not the sandbox (it keeps the environment it
    started with, and what a test does to it stays for the next; a module of its own started one fork server
    more per module, each importing torch and Triton; the confinement tests, one per test)."""
    with make_evaluator(prestart_worker=False) as ev:
        yield ev.sandbox


@pytest.fixture(scope="module")
def evaluator():
    with make_evaluator() as ev:
        yield ev
