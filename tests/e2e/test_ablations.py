"""The ablation script runs its presets as one Hydra multirun and tabulates them (offline presets, tiny budget)."""
import os
import subprocess
import sys

import pytest

from conftest import REPO, kernelevo

SCRIPT = REPO / "experiments" / "ablations" / "run_ablations.py"


@pytest.mark.slow
def test_offline_ablations_run_as_a_multirun_and_are_tabulated(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--presets", "offline_only,random_selection",
                           "--operators", "offline", "--problem", "rmsnorm", "--out", str(tmp_path / "sweep"), "--",
                           "search=tiny", "fitness.trials=2", "fitness.timing.interpreter_reps=1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = (tmp_path / "sweep" / "ablations.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| offline_only") or
            line.startswith("| random_selection")]
    assert len(rows) == 2 and all("1 generation done" in row for row in rows)
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == ["0-offline_only",
                                                                                   "1-random_selection"]


def test_unknown_preset_is_named(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--presets", "no_such"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "unknown presets ['no_such']" in proc.stderr


@pytest.mark.slow
def test_the_profiler_feedback_ablation_differs_from_full_in_the_profiler_only(tmp_path):
    """`full` asks for Nsight Compute feedback; `no_profiler_feedback` is the same team without it."""
    import yaml

    configs = {}
    for preset in ("full", "no_profiler_feedback"):
        proc = kernelevo("run", "--cfg", "job", f"hydra.searchpath=[file://{SCRIPT.parent}]", f"+ablation={preset}",
                         cwd=tmp_path)  # in this process (conftest.kernelevo)
        assert proc.returncode == 0, proc.stderr
        configs[preset] = yaml.safe_load(proc.stdout)
    full, ablated = configs["full"], configs["no_profiler_feedback"]
    assert full["fitness"]["profile"] == "ncu" and ablated["fitness"]["profile"] == "none"
    for config in (full, ablated):
        del config["fitness"]["profile"], config["experiment"]
    assert full == ablated
