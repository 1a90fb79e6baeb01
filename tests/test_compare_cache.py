"""The summary cache behind `whowaits diff/migration`: same answers as summarize, never stale."""

from __future__ import annotations

import json
import shutil

from profiler.analyze import summarize
from profiler.compare import cache

try:
    from test_compare_helpers import FLASH
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import FLASH


def test_cache_returns_what_summarize_returns(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()
    want = json.loads(json.dumps(summarize(str(FLASH))))
    first = cache.summaries(FLASH)
    assert first == want
    entries = list((tmp_path / "cache" / "summaries").glob("*.json"))
    assert len(entries) == 1 and cache.fingerprint() in entries[0].name
    first[0]["duration_ns"] = -1  # a caller's edit must not reach the cache
    cache.clear_memo()
    assert cache.summaries(FLASH) == want  # from disk
    assert cache.summaries(FLASH) == want  # from memory
    # a corrupt entry is a miss, rebuilt
    entries[0].write_text("{not json")
    cache.clear_memo()
    assert cache.summaries(FLASH) == want
    assert json.loads(entries[0].read_text()) == want


def test_a_changed_report_is_never_served_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()
    path = tmp_path / "r.ncu-rep"
    shutil.copy(FLASH, path)
    assert cache.summaries(path)[0]["duration_ns"] == summarize(str(FLASH))[0]["duration_ns"]
    cudnn = FLASH.parents[1] / "ext-sdpa-cudnn" / FLASH.name
    shutil.copy(cudnn, path)  # same path, other content
    assert cache.summaries(path)[0]["kernel"] == summarize(str(cudnn))[0]["kernel"]
    assert cache.summaries(path, kernel="cudnn")[0]["kernel"].startswith("cudnn")
