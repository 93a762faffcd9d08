"""The lab's result sets hold what a reader needs (README, tables, small raw data), not run archives, run databases or
generated pages over 1 MB (issue 67): those stay where a run made them, the earlier ones in the repository's
history, as docs/experiments.md says."""
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

ARCHIVES = (".tgz", ".tar", ".tar.gz", ".zip", ".db", ".sqlite")
PAGE_LIMIT = 1_000_000  # bytes


def _tracked(folder: str) -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", folder], cwd=REPO, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [REPO / line for line in listed.stdout.splitlines()]


def test_no_result_set_holds_an_archive_a_run_database_or_a_page_over_a_megabyte():
    files = _tracked("experiments")
    assert files, "git lists no file under experiments/"
    archives = [str(f.relative_to(REPO)) for f in files if f.name.endswith(ARCHIVES)]
    pages = [str(f.relative_to(REPO)) for f in files
             if f.suffix == ".html" and f.exists() and f.stat().st_size > PAGE_LIMIT]
    assert archives == [] and pages == []


def test_every_result_set_has_a_readme():
    sets = {f.relative_to(REPO / "experiments" / "results").parts[0] for f in _tracked("experiments/results")
            if len(f.relative_to(REPO / "experiments" / "results").parts) > 1}
    assert sets and sorted(s for s in sets if not (REPO / "experiments" / "results" / s / "README.md").exists()) == []
