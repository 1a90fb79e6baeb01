"""The analyses' per-build cache of SASS-only results (profiler/analyze/buildcache.py) on the committed
reports: a summary from a cache hit equals one computed afresh, byte for byte as JSON; a damaged entry is
rebuilt; an unwritable cache folder only costs speed; the same build at another base address hits the
entry and gets its own PCs; the key follows the SASS."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from profiler import cachefile
from profiler.analyze import buildcache, overlap, producers, regions, roles, summarize_launch
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "reports/h200"
SHAPE = "b1_h64_s1024_d128_fp16.ncu-rep"
CUDNN = H200 / "ext-sdpa-cudnn-fullset" / SHAPE
# (report that writes the entry, another report of the same build loaded at another address)
SAME_BUILD = [
    (H200 / "ext-sdpa-cudnn-fullset" / SHAPE, H200 / "ext-sdpa-cudnn" / SHAPE),
    (H200 / "ext-sdpa-flash-fullset" / SHAPE, H200 / "ext-sdpa-flash" / SHAPE),
]


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    """The reports' parsed frames and SASS texts (no analyses' entry), shared by the tests: each starts from a
    copy and hands back what it ingested."""
    return tmp_path_factory.mktemp("ingested")


def _ingest_files(src: Path, dst: Path) -> None:
    for p in src.iterdir():
        if p.suffix in (".frames", ".sass") and p.is_file() and not (dst / p.name).exists():
            shutil.copy(p, dst / p.name)


@pytest.fixture
def own_cache(tmp_path, monkeypatch, ingested):
    cache = tmp_path / "cache"
    cache.mkdir()
    _ingest_files(ingested, cache)
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(cache))
    buildcache.forget()
    yield cache
    buildcache.forget()
    _ingest_files(cache, ingested)


@pytest.fixture
def built(monkeypatch):
    """Counts the SASS-only computations (a cache hit makes none)."""
    calls: list[str] = []
    for mod, name in ((producers, "_find"), (roles, "_static"), (overlap, "_static"), (regions, "_infer_static")):
        real = getattr(mod, name)

        def spy(*a, _real=real, _name=f"{mod.__name__}.{name}", **k):
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(mod, name, spy)
    return calls


def _text(path: Path) -> list[str]:
    """The report's summaries as ``scripts/summaries_snapshot.py`` writes them, from a fresh in-process memo."""
    buildcache.forget()
    return [json.dumps(summarize_launch(la), indent=1) for la in load_report(path).launches]


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.analyses"))


def test_a_hit_gives_the_summary_computed_afresh(own_cache, built):
    fresh = _text(CUDNN)
    assert len(_entries(own_cache)) == 1
    assert {"profiler.analyze.producers._find", "profiler.analyze.roles._static",
            "profiler.analyze.overlap._static", "profiler.analyze.regions._infer_static"} <= set(built)
    built.clear()
    assert _text(CUDNN) == fresh  # read from disk
    assert built == []
    la = load_report(CUDNN).launches[0]
    assert json.dumps(summarize_launch(la), indent=1) == fresh[0]  # the in-process memo


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "truncated", "not json", "wrong parts", "a folder",
                                    "another build's entry"])
def test_a_damaged_entry_is_discarded_and_rebuilt(own_cache, built, damage):
    fresh = _text(CUDNN)
    (entry,) = _entries(own_cache)
    good = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x00garbage")
    elif damage == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "not json":
        cachefile.write(entry, b"{not json")
    elif damage == "wrong parts":  # sealed, decodes, but no part has its shape
        parts = json.loads(cachefile.read(entry))["parts"]
        cachefile.write(entry, json.dumps({"parts": {k: 5 for k in parts}}).encode())
    elif damage == "a folder":
        entry.unlink()
        entry.mkdir()
    else:  # the flash build's entry copied into place: sealed for its own name, not this one
        _text(SAME_BUILD[1][0])
        (other,) = (p for p in _entries(own_cache) if p != entry)
        entry.write_bytes(other.read_bytes())
    built.clear()
    assert _text(CUDNN) == fresh
    assert built  # computed again
    assert entry.is_file() and cachefile.read(entry) is not None
    built.clear()
    assert _text(CUDNN) == fresh  # and the rebuilt entry is a good one
    assert built == []


def test_an_unwritable_cache_folder_costs_no_correctness(tmp_path, monkeypatch, own_cache):
    fresh = _text(CUDNN)
    # a regular file where the cache folder should be: nothing can be read or written there
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(blocked / "cache"))
    assert _text(CUDNN) == fresh
    if os.geteuid() != 0:  # root writes anywhere: a read-only folder holding the entry is hit, never written
        monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(own_cache))
        before = {p: p.read_bytes() for p in _entries(own_cache)}
        own_cache.chmod(0o555)
        try:
            assert _text(CUDNN) == fresh
        finally:
            own_cache.chmod(0o755)
        assert {p: p.read_bytes() for p in _entries(own_cache)} == before


@pytest.mark.slow
@pytest.mark.parametrize("walk", ["kept", "damaged"])
@pytest.mark.parametrize("first,second", SAME_BUILD, ids=lambda p: p.parent.name)
def test_the_same_build_at_another_address_hits_and_gets_its_own_pcs(first, second, walk, own_cache, built):
    fresh = _text(second)  # computed afresh for this report's addresses
    walks = built.count("profiler.analyze.producers._find")
    for p in _entries(own_cache):
        p.unlink()
    a, b = load_report(first).launches[0].sass, load_report(second).launches[0].sass
    assert int(a["address"].iat[0]) != int(b["address"].iat[0])
    assert buildcache.key_of(a) == buildcache.key_of(b)
    _text(first)  # writes the entry at the first report's addresses
    (side,) = own_cache.glob("*.walk")  # the producer walk's graph and registers, for new consumers
    if walk == "damaged":
        side.write_bytes(side.read_bytes()[:-10])
    built.clear()
    hit = _text(second)
    # every SASS-only part came from the entry, but the producer walks of consumers that stall only in
    # this report's samples
    assert set(built) <= {"profiler.analyze.producers._find"} and len(built) < walks
    assert hit == fresh
    # the PCs the summary names are the second report's
    s = json.loads(hit[0])
    pcs = set(int(x) for x in b["address"])
    assert {r["top_address"] for r in s["who_waits"]} <= pcs
    assert s["overlap"] is None or {r["address"] for r in s["overlap"]} <= pcs


def test_the_key_follows_the_sass(own_cache):
    sass = load_report(CUDNN).launches[0].sass
    key = buildcache.key_of(sass)
    assert key == buildcache.key_of(sass.copy())
    texts = sass["sass"].tolist()
    i = next(k for k, t in enumerate(texts) if t.startswith("IMAD") or " IMAD" in t)
    other = sass.copy()
    other.loc[other.index[i], "sass"] = texts[i].replace("IMAD", "IMAD.WIDE", 1)
    assert buildcache.key_of(other) != key  # one text changed
    b = next(k for k, t in enumerate(texts) if "BRA 0x" in t)
    target = int(texts[b].rsplit("0x", 1)[1], 16)
    moved = sass.copy()
    moved.loc[moved.index[b], "sass"] = texts[b].replace(f"{target:#x}", f"{target + 16:#x}")
    assert buildcache.key_of(moved) != key  # one branch target changed
    # the whole function elsewhere: every address and every branch target moved by the same distance
    delta = 0x10000
    from profiler import sasscache

    shifted = sass.copy()
    shifted["address"] = sass["address"] + delta
    shifted["sass"] = sasscache.move(texts, int(sass["address"].iat[0]), int(sass["address"].iat[0]) + delta)
    assert shifted["sass"].tolist() != texts
    assert buildcache.key_of(shifted) == key
    # a frame without its first instruction is another frame
    assert buildcache.key_of(sass.iloc[1:]) != key
