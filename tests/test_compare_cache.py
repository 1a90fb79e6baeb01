"""The summary cache behind `whowaits diff/migration`: same answers as summarize, never stale."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from profiler.analyze import summarize
from profiler import cachefile
from profiler.compare import cache

try:
    from test_compare_helpers import FLASH
    from conftest import seeded_cache
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import FLASH
    from tests.conftest import seeded_cache


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
    assert json.loads(cachefile.read(entries[0])) == want  # rebuilt and sealed again


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


# --- the parallel path (summaries_many) ---------------------------------------------------------

PARALLEL_REPORTS = [FLASH.parents[1] / v / FLASH.name
                    for v in ("ext-sdpa-cudnn", "v06_softmax_fusion", "v04_swizzle_cp_async")]


def _entries(folder):
    return {p.name: p.read_bytes() for p in (folder / "summaries").glob("*.json")}


def test_parallel_summaries_equal_the_serial_ones(tmp_path, monkeypatch):
    served = []
    real_fill = cache._fill_parallel

    def spy_fill(*a, **k):
        served.append(real_fill(*a, **k))
        return served[-1]

    items = [(p, None) for p in PARALLEL_REPORTS] + [(PARALLEL_REPORTS[0], None)]  # one twice
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(seeded_cache(tmp_path / "serial", *PARALLEL_REPORTS)))
    cache.clear_memo()
    serial = cache.summaries_many(items, processes=1)
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(seeded_cache(tmp_path / "parallel")))
    monkeypatch.setattr(cache, "_fill_parallel", spy_fill)
    cache.clear_memo()
    parallel = cache.summaries_many(items, processes=2)
    cache.clear_memo()
    assert served and sum(served) >= 1  # a worker process did summarise at least one report
    assert parallel == serial
    assert repr(parallel) == repr(serial)  # same types too (no numpy scalar where a float was)
    assert _entries(tmp_path / "parallel") == _entries(tmp_path / "serial")  # same disk entries
    import multiprocessing
    import time

    deadline = time.monotonic() + 20
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()  # every worker exited on its own


def test_parallel_summaries_raise_what_the_serial_path_raises(tmp_path, monkeypatch):
    from profiler.errors import WhowaitsError  # noqa: PLC0415

    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(PARALLEL_REPORTS[0].read_bytes()[:100_000])
    items = [(PARALLEL_REPORTS[1], None), (bad, None), *[(p, None) for p in PARALLEL_REPORTS[::2]]]
    errors = []
    for processes in (1, 2):
        monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(seeded_cache(tmp_path / f"c{processes}", *PARALLEL_REPORTS)))
        cache.clear_memo()
        with pytest.raises(WhowaitsError) as err:
            cache.summaries_many(items, processes=processes)
        errors.append(str(err.value))
    cache.clear_memo()
    assert errors[0] == errors[1] and "truncated" in errors[0]


def test_few_or_cached_reports_stay_in_this_process(tmp_path, monkeypatch):
    def no_worker(*a, **k):
        raise AssertionError("no worker process for fewer than PARALLEL_MIN missing reports")

    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(seeded_cache(tmp_path / "cache", *PARALLEL_REPORTS)))
    monkeypatch.setattr(cache, "_fill_parallel", no_worker)
    cache.clear_memo()
    items = [(p, None) for p in PARALLEL_REPORTS[:2]]
    first = cache.summaries_many(items, processes=8)
    cache.clear_memo()  # now on disk: three reports, two of them cached -> one missing
    assert cache.summaries_many(items + [(PARALLEL_REPORTS[2], None)], processes=8)[:2] == first
    cache.clear_memo()


def test_a_failed_summary_write_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    cache.clear_memo()
    want = cache.summaries(FLASH)
    cache.clear_memo()
    shutil.rmtree(tmp_path / "cache" / "summaries")

    import profiler.io as pio

    class DiskFull:  # the temp file is written, then the rename fails as on a full disk
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def replace(src, dst):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(pio, "os", DiskFull())
    assert cache.summaries(FLASH) == want  # the answer, not the entry
    assert list((tmp_path / "cache" / "summaries").iterdir()) == []  # no entry, no temp file
    cache.clear_memo()


def test_whowaits_processes_1_is_the_serial_path(tmp_path, monkeypatch):
    def no_worker(*a, **k):
        raise AssertionError("WHOWAITS_PROCESSES=1 started a worker")

    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(seeded_cache(tmp_path / "cache", *PARALLEL_REPORTS)))
    monkeypatch.setenv("WHOWAITS_PROCESSES", "1")
    monkeypatch.setattr(cache, "_fill_parallel", no_worker)
    cache.clear_memo()
    assert len(cache.summaries_many([(p, None) for p in PARALLEL_REPORTS])) == 3
    cache.clear_memo()
