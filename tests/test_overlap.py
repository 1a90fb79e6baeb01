"""The async-group overlap view (profiler/analyze/overlap.py) on the committed reports, checked by hand.

Hand-check method (2026-12-01): the per-PC SASS frame of each report through the project's ingest
(``load_report(...).launches[0].sass``: ncu_report's ``sass_by_pc`` text, ``inst_executed``, ``samples``), printed
row by row around every ``WARPGROUP.DEPBAR.LE`` / ``DEPBAR.LE`` / ``LDGDEPBAR`` / ``HGMMA … .gsb0``; ``ncu --import
--page source`` is not available on this machine. Offsets are from the kernel's first PC. Reports:
reports/h200/<version>/b1_h64_s1024_d128_fp16.ncu-rep.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from profiler.analyze import summarize
from profiler.analyze.overlap import config, headline, overlap, step_sentence
from profiler.check import fields
from profiler.compare.merge import merge_launches
from profiler.report import load_report
from profiler.sass import parse

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"


def _rep(v: str) -> Path:
    return REPORTS / v / f"{SHAPE}.ncu-rep"


@pytest.fixture(scope="module")
def frames():
    return {v: overlap(load_report(_rep(v)).launches[0]) for v in (
        "v09_wgmma", "v10_warp_specialized", "v11_pingpong", "v12_intra_wg_overlap", "v13_persistent",
        "v14_cross_tile_qk", "ext-sdpa-cudnn", "v05_double_buffer", "ext-sdpa-flash", "v08_tma_mbarrier")}


def _site(df, offset):
    rows = df[df["offset"] == offset]
    assert len(rows) == 1, (offset, list(df["offset"]))
    return rows.iloc[0]


def test_hgmma_gsb_suffix_commits_its_group():
    """ptxas writes the commit on the C operand (``R24.gsb0``); the HGMMAs before it in the batch name no group."""
    assert [b.kind for b in parse("HGMMA.64x128x16.F32 R88, gdesc[UR20], R88.gsb0").barriers] == ["gsb"]
    assert parse("HGMMA.64x128x16.F32 R24, R152, gdesc[UR20].tnspB, R24.gsb0").barriers[0].id == 0
    assert parse("HGMMA.64x128x16.F32 R88, gdesc[UR20], R88").barriers == ()
    assert "R24" in parse("HGMMA.64x128x16.F32 R24, R152, gdesc[UR20].tnspB, R24.gsb0").reads


def test_v14_pv_wait_is_hoisted_above_the_softmax(frames):
    """v14, loop body (28,672 executions of each wait):

    * 0x3ca0 ``HGMMA … R88.gsb0`` commits QK^T[n] (8 HGMMA from 0x3b30), 0x3cf0..0x3fa0 issue PV[n-1] (8 HGMMA
      ``R24, R180…R152, gdesc[UR20].tnspB``), 0x3fa0 ``… R24.gsb0`` commits it, 0x3fb0 ``BAR.ARV``;
    * 0x3fc0 ``WARPGROUP.DEPBAR.LE gsb0, 0x1`` (339 samples) retires QK^T[n]: under it the 8 PV HGMMA;
    * executed between it and 0x48f0 ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` (552 samples, 551 ``barrier``): NOP,
      ``SYNCS.ARRIVE``, ULEA, UISETP, PLOP3, ``@!P0 BRA`` to 0x4860 (the masking path 0x3ff0..0x4850, 130
      FSEL/ISETP/VIADD, has inst_executed 0), then 5 FMNMX + 4 uniform ops: counted work 5 FMNMX + 1 PLOP3 = 6;
    * 0x48f0 retires PV[n-1] (commit 0x3fa0): under it no MUFU; all MUFU.EX2 of the tile (0x4a20…) come after.
    The peeled last tile repeats it: 0x7120 (N=1, 13 samples) -> 0x7980 (N=0, 70 samples), 2 counted between.
    552 + 70 = 622 of 6,647 samples (9.4%) sit on the waits behind the collapsed overlaps."""
    df = frames["v14_cross_tile_qk"]
    assert list(df["offset"]) == [0xdc0, 0x3fc0, 0x48f0, 0x7120, 0x7980, 0xa190]
    assert list(df["pending"]) == [0, 1, 0, 1, 0, 0]
    w1, w0 = _site(df, 0x3fc0), _site(df, 0x48f0)
    assert w1["sass"] == "WARPGROUP.DEPBAR.LE gsb0, 0x1" and w1["executed"] == 28672 and w1["samples"] == 339
    assert w1["commit_offsets"] == [0x3ca0] and w1["overlap_static"]["HGMMA"] == 8
    assert w1["next_offsets"] == [0x48f0] and w1["next_lower"] and w1["collapsed"]
    assert w1["between_work"] == 6.0 and w1["between_work_executed"] == 6 * 28672
    assert w1["between_static"].get("MUFU", 0) == 0
    assert w1["between_executed"]["FP32"] == 5 * 28672  # the 5 FMNMX; the masking path's FSELs never ran
    assert w1["between_static"]["FP32"] == 69  # ... but are in the code (64 FSEL + 5 FMNMX)
    assert w0["samples"] == 552 and w0["top_reason"] == "barrier" and w0["commit_offsets"] == [0x3fa0]
    assert w0["overlap_static"].get("MUFU", 0) == 0 and w0["overlap_static"].get("HGMMA", 0) == 0
    assert not w0["collapsed"]  # N=0: nothing younger to overlap with
    tail = _site(df, 0x7120)
    assert tail["collapsed"] and tail["next_offsets"] == [0x7980] and tail["between_work"] == 2.0
    h = headline(df.to_dict(orient="records"))
    assert h["collapsed"] == 2 and h["held"] == 622 and h["under"] == 0
    assert round(100 * h["held_share"], 1) == 9.4


@pytest.mark.parametrize("version, w1, w0, work, samples", [
    # v12: 0x3df0 (222 samples) -> NOP, SYNCS.ARRIVE, BRA, 5 FMNMX + 4 uniform -> 0x46f0 (726 samples)
    ("v12_intra_wg_overlap", 0x3df0, 0x46f0, 5.0, 726),
    # v13: 0x3ee0 (144 samples) -> 3 counted -> 0x47a0 (636 samples)
    ("v13_persistent", 0x3ee0, 0x47a0, 3.0, 636),
])
def test_v12_v13_collapsed_as_well(frames, version, w1, w0, work, samples):
    df = frames[version]
    a, b = _site(df, w1), _site(df, w0)
    assert a["pending"] == 1 and a["collapsed"] and a["next_offsets"] == [w0] and a["between_work"] == work
    assert a["overlap_static"]["HGMMA"] == 8  # PV's batch issued under QK^T
    assert b["pending"] == 0 and b["samples"] == samples and b["overlap_static"].get("MUFU", 0) == 0
    assert df["collapsed"].sum() == 1


@pytest.mark.parametrize("version, pairs", [
    # (wait offset, its commit, samples): wait_group 0 right behind the group's .gsb0 HGMMA (v11: a BAR.ARV between)
    ("v09_wgmma", [(0x2070, 0x2060, 914), (0x5320, 0x5310, 820)]),
    ("v10_warp_specialized", [(0x15c0, 0x15b0, 1157), (0x39e0, 0x39d0, 1072)]),
    ("v11_pingpong", [(0xd20, 0xd00, 90), (0x39e0, 0x39c0, 1045), (0x5f60, 0x5ec0, 89)]),
    # cuDNN: 0xeb0 HGMMA R24.gsb0 (QK^T) then 0xec0 wait 0 (720 samples); 0x2e60 HGMMA R88.gsb0 (PV) then 0x2e70 (769)
    ("ext-sdpa-cudnn", [(0xec0, 0xeb0, 720), (0x2e70, 0x2e60, 769)]),
])
def test_rungs_without_wait_group_1_overlap_nothing_in_the_warpgroup(frames, version, pairs):
    """v09-v11 and cuDNN never ask for intra-warpgroup overlap: every wait is N=0 and follows its commit at once
    (cuDNN overlaps across its consumer warpgroups instead); nothing is flagged."""
    df = frames[version]
    assert list(df["pending"]) == [0] * len(pairs)
    for off, commit, samples in pairs:
        r = _site(df, off)
        assert r["commit_offsets"] == [commit] and r["samples"] == samples
        if (version, off) == ("v11_pingpong", 0x5f60):
            # the epilogue's PV: 0x5ec0 commit, then WARPSYNC, BAR.ARV, WARPSYNC, SHFL.BFLY (row sum), S2UR, ULDC,
            # SHF, IMAD.SHL, PLOP3 before the wait at 0x5f60
            assert r["overlap_static"] == {"BRANCH": 2, "BAR": 1, "SHFL": 1, "MOVE": 1, "CONST": 1, "INT": 3}
        else:
            assert set(r["overlap_static"]) <= {"BAR"}  # at most a BAR.ARV
    assert not df["collapsed"].any()
    # cuDNN's two DEPBAR.LE SB0, 0x0 (0x3590, 0x3b30) have no LDGDEPBAR to retire: not cp.async waits
    assert set(df["group"]) == {"wgmma"}


def test_cp_async_double_buffer_overlaps_a_whole_tile(frames):
    """v05: LDGDEPBAR at 0x8f0 and 0xb80 (prologue, two stages), 0x14d0 (loop); the loop's 0xef0 ``DEPBAR.LE SB0,
    0x0`` (61,440 executions, 22 samples) retires the group committed at 0xb80 (first trip) or 0x14d0 (previous
    trip): under it the tile's 128 HMMA and 34 MUFU. FA2 (ext-sdpa-flash): the loop wait 0x5f60 (``DEPBAR.LE SB0,
    0x0``, 30,720 executions) retires the group of 0x2140 (prologue) or 0x5f30 (the LDGDEPBAR after the next
    tile's eight LDGSTS, whose ``BRA`` at 0x5f40 leaves for 0xac20 and comes back through the loop head 0x5f50);
    the paths between cover 0x1b90..0xa990 with 292 HMMA and 132 MUFU. Paths through the loop's other wait
    0x6b60 (N=0, it retires the 0x6180 group) stop there: after it nothing is pending."""
    v05 = frames["v05_double_buffer"]
    r = _site(v05, 0xef0)
    assert r["group"] == "cp_async" and r["pending"] == 0 and r["executed"] == 61440 and r["samples"] == 22
    assert r["commit_offsets"] == [0xb80, 0x14d0]
    assert r["overlap_static"]["HMMA"] == 128 and r["overlap_static"]["MUFU"] == 34
    first = _site(v05, 0xb90)
    assert first["pending"] == 1 and first["commit_offsets"] == [0x8f0] and not first["collapsed"]
    fl = _site(frames["ext-sdpa-flash"], 0x5f60)
    assert fl["commit_offsets"] == [0x2140, 0x5f30] and fl["executed"] == 30720
    assert fl["overlap_static"]["HMMA"] == 292 and fl["overlap_static"]["MUFU"] == 132
    assert _site(frames["ext-sdpa-flash"], 0x6b60)["commit_offsets"] == [0x6180]
    assert not frames["ext-sdpa-flash"]["collapsed"].any() and not v05["collapsed"].any()


def test_no_async_group_is_null_with_a_reason_that_no_gate_counts():
    """v08 (TMA + mbarrier, mma.sync) commits no group: ``overlap`` null, a ``missing`` entry of section
    ``none`` with the reason; ``whowaits check``'s no_missing does not count it."""
    s = summarize(_rep("v08_tma_mbarrier"))[0]
    assert s["overlap"] is None
    entry = [m for m in s["missing"] if m["field"] == "overlap"]
    assert entry == [{"field": "overlap", "section": "none", "reason": "the SASS commits no wgmma or cp.async group"}]
    assert not [m for m in fields.missing(s) if m.startswith("overlap")]


def test_summary_field_single_and_merged_agree():
    s = summarize(_rep("v14_cross_tile_qk"))[0]
    json.dumps(s["overlap"], allow_nan=False)
    m = merge_launches([s, copy.deepcopy(s)])
    assert [r["offset"] for r in m["overlap"]] == [r["offset"] for r in s["overlap"]]
    for a, b in zip(s["overlap"], m["overlap"]):
        assert set(a) == set(b)
        assert b["samples"] == 2 * a["samples"] and b["executed"] == 2 * a["executed"]
        assert b["share"] == pytest.approx(a["share"]) and b["between_work"] == pytest.approx(a["between_work"])
        assert b["collapsed"] == a["collapsed"] and b["overlap_static"] == a["overlap_static"]
        assert b["between_executed"] == {k: 2 * v for k, v in a["between_executed"].items()}
    assert merge_launches([summarize(_rep("v08_tma_mbarrier"))[0]] * 2)["overlap"] is None


def test_step_sentence_names_the_collapse_appearing_and_going():
    v11 = summarize(_rep("v11_pingpong"))[0]["overlap"]
    v12 = summarize(_rep("v12_intra_wg_overlap"))[0]["overlap"]
    v14 = summarize(_rep("v14_cross_tile_qk"))[0]["overlap"]
    s = step_sentence("v12", v11, v12)
    assert s.startswith("v12: a collapsed wgmma overlap appears") and "726 samples, 9.9%" in s and "0 MUFU" in s
    gone = step_sentence("v11", v14, v11)
    assert gone.startswith("v11: the collapsed wgmma overlap is gone") and gone.endswith("it waits on every wgmma group with N=0 only")
    assert step_sentence("v08", v14, summarize(_rep("v08_tma_mbarrier"))[0]["overlap"]).endswith("it has no wgmma wait")
    assert step_sentence("v14", v12, v14) is None  # collapsed in both


def test_summaries_cache_key_covers_the_view():
    """The summary cache fingerprints every package file but cli/, html.py, plots.py: the module and its data."""
    from profiler import cachefile
    from profiler.compare import cache

    files, _, exclude = cache._SUMMARY_FROM
    covered = {p.relative_to(cachefile.PACKAGE).as_posix() for spec in files for p in cachefile._files(spec)
               if not any(p.relative_to(cachefile.PACKAGE).as_posix().startswith(e) for e in exclude)}
    assert {"analyze/overlap.py", "data/overlap.toml", "sass/instruction.py"} <= covered
    assert config()["max_work"] == 16


def test_cli_show_and_diff():
    from clirun import whowaits

    out = whowaits("show", _rep("v14_cross_tile_qk"), "--format", "json")
    assert out.returncode == 0, out.stderr
    sites = json.loads(out.stdout)[0]["overlap"]
    assert [r["offset"] for r in sites if r["collapsed"]] == [0x3fc0, 0x7120]
    tab = whowaits("show", _rep("v14_cross_tile_qk"))
    assert "Async-group overlap" in tab.stdout and "COLLAPSED" in tab.stdout and "622 samples (9.4%)" in tab.stdout
    d = whowaits("diff", _rep("v11_pingpong"), _rep("v12_intra_wg_overlap"), "--format", "json")
    assert d.returncode == 0, d.stderr
    assert "a collapsed wgmma overlap appears" in json.dumps(json.loads(d.stdout))
    none = whowaits("show", _rep("v08_tma_mbarrier"))
    assert "Async-group overlap: the SASS commits no wgmma or cp.async group" in none.stdout


def test_gate_no_collapsed_overlap(tmp_path):
    """A rung built for wait_group-1 overlap can require it: v14 fails (its two collapsed waits named), v11
    (no N>=1 wait) and v08 (no async group at all) pass."""
    from profiler import check

    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{REPORTS}"\n[[check.rule]]\nversion = ["v14_cross_tile_qk", "v11_pingpong",'
                   f' "v08_tma_mbarrier"]\nshape = "{SHAPE}"\nno_collapsed_overlap = true\n')
    res = {r.version: r for r in check.run(policy=pol).results if r.check == "no_collapsed_overlap"}
    assert res["v14_cross_tile_qk"].verdict == "fail"
    assert res["v14_cross_tile_qk"].value == ["wgmma wait@0x3fc0(N=1) -> 0x48f0", "wgmma wait@0x7120(N=1) -> 0x7980"]
    assert res["v11_pingpong"].verdict == "pass" and res["v08_tma_mbarrier"].verdict == "pass"


def _synthetic(lines: list[str]):
    """A stand-in launch whose SASS is ``lines`` (one execution each, one barrier sample on every wait)."""
    import numpy as np
    import pandas as pd

    from profiler import metrics as M
    from profiler.report import Launch

    n = len(lines)
    ops = [M.full_opcode(t) for t in lines]
    bases = [o.split(".", 1)[0] for o in ops]
    waits = [int("DEPBAR" in t) for t in lines]
    sass = pd.DataFrame({"launch": np.zeros(n, np.int64), "address": np.arange(n, dtype=np.uint64) * 16 + 0x1000,
                         "offset": np.arange(n, dtype=np.int64) * 16, "sass": lines, "opcode": ops, "base": bases,
                         "opcode_class": [M.classify_opcode(b) for b in bases],
                         "inst_executed": np.ones(n, np.int64), "samples": np.array(waits, np.int64),
                         "stall_barrier": np.array(waits, np.int64)})
    return Launch(report="synthetic", index=0, kernel="k", metrics=pd.DataFrame(
        {"metric": [], "instance": [], "value": [], "text": []}), sass=sass)


QK = ["WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ, !UPT", "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24.gsb0"]
PV = ["HGMMA.64x128x16.F32 R88, R152, gdesc[UR8].tnspB, R88.gsb0"]


def test_rules_on_synthetic_sass():
    """The same wait_group 1 / wait_group 0 pair: collapsed with 3 FMNMX between, an overlap with 20 MUFU between,
    not a collapse when a new group is committed between; an N=0 wait retires nothing on a path whose earlier
    wait already drained the groups."""
    w1, w0 = "WARPGROUP.DEPBAR.LE gsb0, 0x1", "WARPGROUP.DEPBAR.LE gsb0, 0x0"
    tight = overlap(_synthetic(QK + PV + [w1, "UIADD3 UR4, UR4, 0x1, URZ"] + ["FMNMX R8, R24, R25, !PT"] * 3
                               + [w0, "EXIT"]))
    assert list(tight["pending"]) == [1, 0] and list(tight["collapsed"]) == [True, False]
    assert tight.iloc[0]["between_work"] == 3.0 and tight.iloc[0]["commit_offsets"] == [0x20]
    assert tight.iloc[1]["commit_offsets"] == [0x30] and tight.iloc[1]["overlap_static"] == {
        "WARPGROUP": 1, "UNIFORM": 1, "FP32": 3}
    wide = overlap(_synthetic(QK + PV + [w1] + ["MUFU.EX2 R24, R24"] * 20 + [w0, "EXIT"]))
    assert not wide.iloc[0]["collapsed"] and wide.iloc[1]["overlap_static"]["MUFU"] == 20
    recommit = overlap(_synthetic(QK + PV + [w1] + QK + [w0, "EXIT"]))
    assert not recommit.iloc[0]["next_lower"] and not recommit.iloc[0]["collapsed"]
    drained = overlap(_synthetic(QK + [w0, "NOP", w0, "EXIT"]))
    assert drained.iloc[0]["commit_offsets"] == [0x20] and drained.iloc[1]["commit_offsets"] == []
