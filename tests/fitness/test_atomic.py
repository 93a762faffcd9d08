"""``fitness.common.atomic.write_atomic``: a reader sees the old file or the new one, never part of it or a stray
temporary."""
import os
import threading

import pytest

from fitness.common.atomic import write_atomic


def test_writes_and_replaces_with_the_permissions_of_a_plain_open(tmp_path):
    path = tmp_path / "row.json"
    write_atomic(path, "first")
    write_atomic(str(path), "second")
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert path.read_text() == "second" and sorted(os.listdir(tmp_path)) == ["plain", "row.json"]
    assert path.stat().st_mode == plain.stat().st_mode


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "stage"
    write_atomic(path, "old")

    with pytest.raises(TypeError):
        write_atomic(path, b"bytes are not text")  # fails inside the write, after the temporary was made
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["stage"]


def test_concurrent_writers_of_one_path_leave_one_whole_file(tmp_path):
    path = tmp_path / "seed.json"
    texts = [str(i) * 10_000 for i in range(8)]
    threads = [threading.Thread(target=write_atomic, args=(path, text)) for text in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_text() in texts and os.listdir(tmp_path) == ["seed.json"]
