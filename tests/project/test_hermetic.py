"""The suite is hermetic: it and every command it starts live in a home of their own (conftest.SESSION_HOME), so
nothing lands in the user's ~/.cache/kernelevo and nothing cached there (by an older kernelevo) is read."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import REAL_HOME, REPO, SESSION_HOME, make_evaluator
from fitness.evaluation.evaluator import default_cache_dir


def test_kernelevos_cache_follows_home_and_xdg_cache_home_when_asked(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / ".cache" / "kernelevo"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "kernelevo"


def test_the_suite_and_the_commands_it_starts_cache_in_a_home_of_their_own():
    assert SESSION_HOME != REAL_HOME and Path.home() == SESSION_HOME
    assert default_cache_dir() == SESSION_HOME / ".cache" / "kernelevo"
    with make_evaluator(prestart_worker=False) as ev:
        assert ev.cache_dir == SESSION_HOME / ".cache" / "kernelevo"
    code = "from fitness.evaluation.evaluator import default_cache_dir; import os; print(default_cache_dir(), " \
           "os.environ['TRITON_CACHE_DIR'], os.environ['TORCHINDUCTOR_CACHE_DIR'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.split() and all(Path(path).is_relative_to(SESSION_HOME) for path in out.split()), out
