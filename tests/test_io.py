"""profiler/io.py: the one atomic-write helper (reports cache, summaries cache, sidecars, HTML use it)."""

from __future__ import annotations

import json
import os
import stat

import pandas as pd
import pytest

from profiler.io import write_atomic, write_json_atomic


def test_writes_text_bytes_and_callables_with_open_s_mode(tmp_path):
    mask = os.umask(0o022)
    try:
        p = write_atomic(tmp_path / "a" / "b.txt", "héllo")  # parents made
        assert p.read_text(encoding="utf-8") == "héllo"
        assert stat.S_IMODE(p.stat().st_mode) == 0o644  # like open(), not mkstemp's 0600
        write_atomic(p, b"\x00\x01")
        assert p.read_bytes() == b"\x00\x01"
        q = write_atomic(tmp_path / "f.parquet", lambda tmp: pd.DataFrame({"x": [1, 2]}).to_parquet(tmp))
        assert pd.read_parquet(q)["x"].tolist() == [1, 2]
        j = write_json_atomic(tmp_path / "s.json", {"k": [1]})
        assert json.loads(j.read_text()) == {"k": [1]} and j.read_text().endswith("\n")
    finally:
        os.umask(mask)
    assert sorted(x.name for x in tmp_path.rglob("*") if x.name.endswith(".tmp")) == []


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path, exc):
    target = tmp_path / "keep.json"
    target.write_text("old")

    def half_then_fail(tmp):
        tmp.write_text("half")
        raise exc

    with pytest.raises(type(exc)):
        write_atomic(target, half_then_fail)
    assert target.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["keep.json"]


def test_no_folder_no_mkdir(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "missing" / "x", "y", mkdir=False)
    assert list(tmp_path.iterdir()) == []
