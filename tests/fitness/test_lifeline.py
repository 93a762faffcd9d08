"""fitness.common.lifeline: a child started with lifeline_env() and armed dies with its parent, even one killed with
SIGKILL (through PR_SET_PDEATHSIG, or the watchdog thread where prctl is missing); it ends at once when its parent died
before it armed; its own children do not inherit the lifeline. The bench's use of it: test_bench.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import alive, process_stat
from fitness.common.lifeline import PARENT_PID, arm, lifeline_env

CHILD = """import os, sys, time
sys.platform = {platform!r}  # 'darwin': no prctl, the watchdog thread instead
from fitness.common.lifeline import PARENT_PID, arm
print(arm(), os.environ.get(PARENT_PID), flush=True)
time.sleep(60)
"""
PARENT = """import subprocess, sys, time
from fitness.common.lifeline import lifeline_env
child = subprocess.Popen([sys.executable, "-c", {child!r}], env=lifeline_env())
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_an_armed_child_dies_with_its_killed_parent(platform):
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(child=CHILD.format(platform=platform))],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    child, start = None, None
    try:
        child = int(parent.stdout.readline())
        start = process_stat(child)[19]
        assert parent.stdout.readline().split() == ["True", "None"]  # armed; its own children get no lifeline
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        end = time.time() + 5
        while alive(child, start) and time.time() < end:
            time.sleep(0.05)
        assert not alive(child, start)
    finally:
        parent.kill()
        parent.wait()
        if child is not None and start is not None and alive(child, start):
            os.kill(child, signal.SIGKILL)


def test_a_child_whose_parent_is_gone_before_it_arms_ends_at_once():
    orphan = {**os.environ, PARENT_PID: "1"}  # the pid it was told is not its parent's: adopted, as after a death
    done = subprocess.run([sys.executable, "-c", "from fitness.common.lifeline import arm; arm(); print('still here')"],
                          env=orphan, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL and "still here" not in done.stdout


def test_a_process_started_without_a_lifeline_is_left_alone(monkeypatch):
    monkeypatch.delenv(PARENT_PID, raising=False)
    assert arm() is False
    assert lifeline_env({"A": "1"}) == {"A": "1", PARENT_PID: str(os.getpid())}
