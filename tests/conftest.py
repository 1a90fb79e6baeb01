"""Shared fixtures: the committed starter reports, their golden CSVs (ncu's own output for the
same files), and an isolated ingestion cache for the whole session."""

from __future__ import annotations

import csv
import os
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: CI sets CI=true (.ci/run): there nothing the suite needs may be missing, so nothing is skipped
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def have_nvcc() -> bool:
    """Whether kernels.build finds an nvcc (PATH, /usr/local/cuda, or PyPI's nvidia-cuda-nvcc of the
    dev extra)."""
    from kernels import build
    from profiler.errors import WhowaitsError

    try:
        build.find_nvcc()
    except WhowaitsError:
        return False
    return True


#: compile tests: skipped without nvcc, except in CI, where they run (and fail with build.find_nvcc's
#: message) instead of passing silently; the dev extra installs nvcc from PyPI
needs_nvcc = pytest.mark.skipif(not IN_CI and not have_nvcc(),
                                reason="no nvcc (pip install -e '.[dev]' installs PyPI's nvidia-cuda-nvcc)")
GOLDEN = Path(__file__).resolve().parent / "golden"

@pytest.fixture(scope="session")
def ladder_built():
    """Every rung built at the bench shapes (what the policy check, ``profile --all`` and the provenance
    check compile) before the test that asks runs: two nvcc at a time, and under pytest-xdist in an order
    that depends on the worker, so two workers that need the builds at once split them through
    kernels.build's per-key lock (one builds from the front, the other from the back) instead of one
    waiting idle while the other compiles the ladder (test_all_splits_the_session_report: 1.3 s alone,
    83-109 s beside the policy check under xdist, load 7-10). A failed build is left to the test."""
    if not IN_CI and not have_nvcc():
        return
    from kernels import build, registry
    from kernels.config import Shape

    jobs, seen = [], set()
    for key in ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16"):
        shp = Shape.parse(key)
        for v in registry.versions():
            try:
                cfg = v.config_for(shp.head_dim, shp.dtype, shp.causal)
            except Exception:  # noqa: BLE001 - a rung without this shape: nothing to prebuild
                continue
            if (v.id, cfg) not in seen:
                seen.add((v.id, cfg))
                jobs.append((v, cfg))
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        jobs.reverse()
    build.build_many(jobs, workers=2)


# stem of tests/golden/<stem>.*.csv -> committed report
STARTER_REPORTS = {
    "ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16": ROOT / "reports/h200/ext-sdpa-flash-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
    "ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16": ROOT / "reports/h200/ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
}


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory):
    """Point the ingestion cache at the session's own folder (never ~/.cache).

    In CI (or with ``WHOWAITS_TEST_FRESH_CACHE=1``) that is a fresh folder under the session's temporary
    base: every ingestion runs cold. Elsewhere it is the checkout's ``.cache/whowaits/tests``, kept from
    one run to the next: its entries are keyed on the report's bytes and a fingerprint of the code that
    produced them (profiler.cachefile), so an edit to the analysis recomputes the summaries while the
    parsed reports and their SASS text stay warm; that is what makes the fast tier's inner loop fast.
    The tests of the caches themselves use folders of their own (seeded_cache, tmp_path).

    Under pytest-xdist the workers share the folder: its entries are content-keyed and written
    atomically, so a report one worker ingested is a cache hit for the other, as in a one-process run."""
    from profiler import settings

    if IN_CI or settings.flag("WHOWAITS_TEST_FRESH_CACHE"):
        base = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            base = base.parent  # .../pytest-N/popen-gwK -> .../pytest-N, this session's own
        folder = base / "whowaits-cache"
    else:
        folder = ROOT / ".cache" / "whowaits" / "tests"
    folder.mkdir(parents=True, exist_ok=True)
    global SESSION_CACHE
    SESSION_CACHE = folder
    mp = pytest.MonkeyPatch()
    mp.setenv("WHOWAITS_CACHE_DIR", str(folder))
    if os.environ.get("PYTEST_XDIST_WORKER") and "WHOWAITS_PROCESSES" not in os.environ:
        # the xdist workers already keep every CPU busy: a cold multi-report summary (migration, report
        # --html on a fresh cache) summarises in this process instead of spawning a pool worker, which
        # would cost a fresh interpreter's imports (~1 s of CPU) to gain nothing. The parallel path keeps
        # its own tests (tests/test_compare_cache.py, test_cli.py's signal tests), which ask for it
        mp.setenv("WHOWAITS_PROCESSES", "1")
    yield
    mp.undo()


#: the session's ingestion cache folder (set by _session_cache_dir)
SESSION_CACHE: Path | None = None


def seeded_cache(folder: Path, *reports: Path) -> Path:
    """A fresh cache folder for a test of the frames or summaries caches (``folder``, created), holding the
    session's SASS-text entries of ``reports`` and of any report ingested so far (profiler/sasscache.py: keyed
    on the bytes of the ELF module, as a user's cache holds them after any earlier run of the same build), so
    such a test pays the ingestion and the caching it is about, not ncu_report's disassembly of every slot
    again (~0.1 ms of CPU a slot: ~6 s over the suite's cache tests, 2026-12-01). The tests of the SASS-text
    cache itself (tests/test_sasscache.py) start from empty folders."""
    import shutil

    from profiler.report import load_report

    assert SESSION_CACHE is not None
    if reports:
        mp = pytest.MonkeyPatch()
        mp.setenv("WHOWAITS_CACHE_DIR", str(SESSION_CACHE))
        try:
            for r in reports:
                load_report(r)  # a hit in the session's cache once any test has ingested it
        finally:
            mp.undo()
    folder.mkdir(parents=True, exist_ok=True)
    for entry in SESSION_CACHE.glob("*.sass"):
        shutil.copy2(entry, folder / entry.name)
    return folder


@pytest.fixture(scope="session", params=sorted(STARTER_REPORTS))
def stem(request) -> str:
    """Each starter report's golden stem, in turn."""
    return request.param


@pytest.fixture(scope="session")
def starter_report_path(stem) -> Path:
    return STARTER_REPORTS[stem]


_LOADED: dict = {}


@pytest.fixture(scope="session")
def starter_report(stem, _session_cache_dir):
    """The ingested starter report (loaded once per session)."""
    from profiler.report import load_report

    if stem not in _LOADED:
        _LOADED[stem] = load_report(STARTER_REPORTS[stem])
    return _LOADED[stem]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@lru_cache(maxsize=None)
def golden_raw(stem: str) -> dict[str, tuple[str, str]]:
    """``ncu --import F --page raw --csv``: metric -> (unit, value text) of the single launch."""
    rows = list(csv.reader(open(GOLDEN / f"{stem}.raw.csv", newline="")))
    header, units, values = rows[0], rows[1], rows[2]
    return {h: (u, v) for h, u, v in zip(header, units, values)}


def golden_raw_number(stem: str, metric: str) -> float:
    return _number(golden_raw(stem)[metric][1])


@lru_cache(maxsize=None)
def golden_source(stem: str) -> tuple[str, list[dict]]:
    """``ncu --import F --page source --csv --print-source sass``: (kernel name, rows)."""
    rows = list(csv.reader(open(GOLDEN / f"{stem}.source.csv", newline="")))
    kernel = rows[0][1]
    header = rows[1]
    return kernel, tuple(dict(zip(header, r)) for r in rows[2:])


def golden_details(stem: str) -> list[dict]:
    """``ncu --import F --page details --csv``: rows as dicts."""
    rows = list(csv.reader(open(GOLDEN / f"{stem}.details.csv", newline="")))
    return [dict(zip(rows[0], r)) for r in rows[1:]]


_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_NS = {"ns": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def golden_raw_si(stem: str, metric: str) -> float:
    """A raw-page value in base units (bytes, Hz, byte/s; durations in ns): ncu's CSV scales
    units (``Mbyte``, ``Gbyte/s``, ``Ghz``, ``us``) for printing."""
    unit, text = golden_raw(stem)[metric]
    value = _number(text)
    if unit in _TIME_NS:
        return value * _TIME_NS[unit]
    if unit[:1] in _PREFIX and unit[1:].lower().startswith(("byte", "hz")):
        return value * _PREFIX[unit[0]]
    return value


# --- the fast tier ---------------------------------------------------------------------------------------
#: node ids marked ``slow`` at collection (scripts/slow_tests.py writes the list from a measured full run)
SLOW_LIST = Path(__file__).resolve().parent / "slow_tests.txt"


def pytest_collection_modifyitems(config, items):
    """Mark the tests (or whole files) listed in tests/slow_tests.txt ``slow``: ``pytest -m "not slow"`` is the fast tier
    (docs/testing.md); a test may also carry ``@pytest.mark.slow`` itself."""
    try:
        listed = {ln.strip() for ln in SLOW_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    except OSError:
        return
    for item in items:
        if item.nodeid in listed or item.nodeid.split("::", 1)[0] in listed:  # a test, or a whole file
            item.add_marker(pytest.mark.slow)
