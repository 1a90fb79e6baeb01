"""The SASS-text cache (profiler/sasscache.py) on the committed reports: a report of a build seen
before gets its SASS text without ncu_report's disassembler, moved to its own addresses and equal
to what ncu_report prints, byte for byte; damaged entries are rebuilt; what cannot be moved is not
cached."""

from __future__ import annotations

from pathlib import Path

import ncu_report
import pandas as pd
import pytest

from profiler import cachefile, sasscache
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "reports/h200"
SHAPE = "b1_h64_s1024_d128_fp16.ncu-rep"
# (report that writes the entry, another report of the same build loaded at another address)
SAME_BUILD = [
    (H200 / "ext-sdpa-flash-fullset" / SHAPE, H200 / "ext-sdpa-flash" / SHAPE),
    (H200 / "ext-sdpa-cudnn-fullset" / SHAPE, H200 / "ext-sdpa-cudnn" / SHAPE),
]
SWEEP = H200 / "sweeps/ladder-3-shapes/reports/h200/v13_persistent/b4_h16_s4096_d128_fp16.ncu-rep"


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def disassembled(monkeypatch):
    """Counts ncu_report's per-slot calls, sass_by_pc and source_info (in this process: the worker of profiler/sass_worker.py,
    tested in tests/test_sass_worker.py, is off here)."""
    monkeypatch.setenv("WHOWAITS_SASS_WORKER", "0")
    calls = []
    real = ncu_report.IAction.sass_by_pc

    def counting(self, pc):
        calls.append(pc)
        return real(self, pc)

    monkeypatch.setattr(ncu_report.IAction, "sass_by_pc", counting)
    real_info = ncu_report.IAction.source_info

    def counting_info(self, pc):
        calls.append(("source_info", pc))
        return real_info(self, pc)

    monkeypatch.setattr(ncu_report.IAction, "source_info", counting_info)
    return calls


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.sass"))


@pytest.mark.parametrize("first,second", SAME_BUILD, ids=lambda p: p.parent.name)
def test_a_known_build_is_read_without_the_disassembler_and_equals_ncu_report(first, second, own_cache,
                                                                               disassembled):
    truth = load_report(second, use_cache=False)  # no cache of any kind: ncu_report's own text
    assert disassembled, "the reference must come from ncu_report"
    load_report(first)
    assert len(_entries(own_cache)) == 1
    disassembled.clear()
    hit = load_report(second)
    assert disassembled == []  # neither a text nor a source line read slot by slot
    (la,), (ref,) = hit.launches, truth.launches
    # the two reports load the function at different addresses: the moved text is what ncu prints
    assert int(la.sass["address"].iat[0]) != int(load_report(first).launches[0].sass["address"].iat[0])
    assert la.sass["sass"].str.contains(r"BRA 0x[0-9a-f]{9,}").any()  # branch targets were moved
    pd.testing.assert_frame_equal(la.sass, ref.sass)
    pd.testing.assert_frame_equal(la.metrics, ref.metrics)


def test_a_damaged_or_forged_entry_is_rebuilt(own_cache, disassembled):
    first, second = SAME_BUILD[1]
    load_report(first)
    (entry,) = _entries(own_cache)
    blob = bytearray(entry.read_bytes())
    blob[-10] ^= 0x01
    entry.write_bytes(bytes(blob))
    truth = load_report(second, use_cache=False)
    disassembled.clear()
    got = load_report(second)
    assert disassembled, "a damaged entry must not be used"
    pd.testing.assert_frame_equal(got.launches[0].sass, truth.launches[0].sass)
    # rebuilt by that read, sealed again (same key)
    (again,) = _entries(own_cache)
    assert again == entry and cachefile.read(entry) is not None
    # a well-sealed entry for another function size (a forged key) is discarded, never used
    payload = cachefile.read(entry).replace(b'"size": ', b'"size": 1', 1)
    cachefile.write(entry, payload)
    for f in own_cache.glob("*.frames"):
        f.unlink()
    disassembled.clear()
    got = load_report(second)
    assert disassembled
    pd.testing.assert_frame_equal(got.launches[0].sass, truth.launches[0].sass)
    # an entry that lacks a slot's source or opcode (a shorter list, a field gone) is discarded too
    for cut in (b'"lines": [', b'"opcodes": ['):
        payload = cachefile.read(entry)
        assert payload is not None and cut in payload
        cachefile.write(entry, payload.replace(cut, cut + b'"x", ', 1))
        for f in own_cache.glob("*.frames"):
            f.unlink()
        disassembled.clear()
        got = load_report(second)
        assert disassembled
        pd.testing.assert_frame_equal(got.launches[0].sass, truth.launches[0].sass)


def test_no_sass_cache_without_the_cache(own_cache):
    load_report(SAME_BUILD[1][0], use_cache=False)
    assert _entries(own_cache) == []


def test_modules_of_a_report_and_of_a_multi_module_sweep_report():
    flash = sasscache.Modules(SAME_BUILD[0][0])
    la = load_report(SAME_BUILD[0][0]).launches[0]
    sha, size = flash.function(_mangled(SAME_BUILD[0][0]))
    assert len(sha) == 64
    assert size == len(la.sass) * 16  # every slot of the function, padding included
    # the sweep report holds the modules of five rungs; v13's there is another build than v13's own
    sweep = sasscache.Modules(SWEEP)
    own = sasscache.Modules(H200 / "v13_persistent" / SHAPE)
    name = _mangled(SWEEP)
    assert sweep.function(name) is not None and own.function(name) is not None
    assert sweep.function(name)[0] != own.function(name)[0]
    assert sum(1 for n in sweep._functions if "flash_fwd" in n) == 5
    # one name in two modules with different bytes is ambiguous: not cached
    both = SWEEP.read_bytes() + (H200 / "v13_persistent" / SHAPE).read_bytes()
    assert sasscache._scan(both)[name] is None


def _mangled(path: Path) -> str:
    ctx = ncu_report.load_report(str(path))
    return ctx.range_by_idx(0).action_by_idx(0).name(ncu_report.IAction.NameBase_MANGLED)


def test_what_can_be_moved():
    base, size = 0x7F0000001000, 0x40
    texts = ["@!P0  BRA 0x7f0000001030", "IMAD.MOV.U32 R237, RZ, RZ, -0x800000", "BSSY B0, 0x7f0000001040",
             "RET.REL.NODEC R2, 0x7f0000001000"]
    ops = ["BRA", "IMAD.MOV.U32", "BSSY", "RET.REL.NODEC"]
    assert sasscache.movable(texts, ops, base, size)
    moved = sasscache.move(texts, base, 0x7F1234560000)
    assert moved == ["@!P0  BRA 0x7f1234560030", "IMAD.MOV.U32 R237, RZ, RZ, -0x800000",
                     "BSSY B0, 0x7f1234560040", "RET.REL.NODEC R2, 0x7f1234560000"]
    assert sasscache.move(moved, 0x7F1234560000, base) == texts
    # a target outside the function, an address in another opcode, an absolute call, a low base
    assert not sasscache.movable(["BRA 0x7f0000002000"], ["BRA"], base, size)
    assert not sasscache.movable(["MOV R0, 0x7f0000001010"], ["MOV"], base, size)
    assert not sasscache.movable(["CALL.ABS.NOINC 0x7f0000001010"], ["CALL.ABS.NOINC"], base, size)
    assert not sasscache.movable(["BRA 0x1030"], ["BRA"], 0x1000, size)
