"""Ingestion of the committed starter reports, checked against ncu's own CSV output for the
same files (tests/golden), plus the cache and bad-input behaviour of load_report."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import STARTER_REPORTS, golden_raw, golden_raw_number, golden_source

from profiler import cachefile
from profiler import metrics as M
from profiler import report as R
from profiler.errors import WhowaitsError
from profiler.report import load_report, select_launches

# ncu's source page abbreviates the sampler's reasons (and has no warpgroup_arrive column)
SOURCE_COLUMN = {
    "barrier": "stall_barrier", "branch_resolving": "stall_branch_resolving",
    "dispatch_stall": "stall_dispatch", "drain": "stall_drain", "imc_miss": "stall_imc",
    "lg_throttle": "stall_lg", "long_scoreboard": "stall_long_sb", "math_pipe_throttle": "stall_math",
    "membar": "stall_membar", "mio_throttle": "stall_mio", "misc": "stall_misc",
    "no_instructions": "stall_no_inst", "not_selected": "stall_not_selected",
    "selected": "stall_selected", "short_scoreboard": "stall_short_sb", "sleeping": "stall_sleep",
    "tex_throttle": "stall_tex", "wait": "stall_wait",
}
SOURCE_NOT_ISSUED = {r: c + " (Not Issued)" for r, c in SOURCE_COLUMN.items()}
SOURCE_NOT_ISSUED["sleeping"] = "stall_sleeping (Not Issued)"  # sic: ncu's own header


def test_one_launch_with_the_kernel_ncu_names(stem, starter_report):
    kernel, _ = golden_source(stem)
    assert len(starter_report.launches) == 1
    la = starter_report.launches[0]
    assert la.kernel == kernel
    assert la.index == 0
    assert len(starter_report.sha256) == 64
    assert list(la.metrics.columns) == R.METRIC_COLUMNS
    assert (la.metrics["report"] == starter_report.path).all()


def test_every_kernel_level_stall_count_equals_ncu(stem, starter_report):
    raw = golden_raw(stem)
    la = starter_report.launches[0]
    cfg = M.stall_config()
    checked = 0
    for name, (_, text) in raw.items():
        if name.startswith(cfg["sample_prefix"]):
            assert la.value(name) == float(text.replace(",", "")), name
            checked += 1
    # 19 sampled reasons x (all, not issued) on gh100
    assert checked == 38
    assert la.value(cfg["sample_count"]) == golden_raw_number(stem, cfg["sample_count"])


def test_per_pc_samples_sum_to_kernel_totals(starter_report):
    la = starter_report.launches[0]
    cfg = M.stall_config()
    for reason in M.stall_reasons():
        name = cfg["sample_prefix"] + reason
        if la.value(name) is None:
            assert f"stall_{reason}" not in la.sass.columns
            continue
        assert la.sass[f"stall_{reason}"].sum() == la.value(name), reason
        assert la.sass[f"not_issued_{reason}"].sum() == la.value(name + cfg["not_issued_suffix"]), reason
    stall_cols = [c for c in la.sass.columns if c.startswith("stall_")]
    assert (la.sass[stall_cols].sum(axis=1) == la.sass["samples"]).all()
    assert la.sass["samples"].sum() == la.value(cfg["sample_count"])


def test_per_pc_values_equal_ncu_source_page(stem, starter_report):
    _, rows = golden_source(stem)
    sass = starter_report.launches[0].sass
    by_pc = sass.set_index(sass["address"].astype("int64"))
    assert len(rows) == len(sass)
    assert sorted(int(r["Address"], 16) for r in rows) == sorted(by_pc.index)
    for r in rows:
        ours = by_pc.loc[int(r["Address"], 16)]
        # mnemonic with modifiers equal (operand order differs between disassembler versions)
        assert ours["opcode"] == M.full_opcode(r["Source"]), r["Address"]
        assert ours["inst_executed"] == int(r["Instructions Executed"].replace(",", ""))
        assert ours["thread_inst_executed"] == int(r["Thread Instructions Executed"].replace(",", ""))
        assert ours["samples"] == int(r["Warp Stall Sampling (All Samples)"].replace(",", ""))
        for reason, col in SOURCE_COLUMN.items():
            assert ours[f"stall_{reason}"] == int(r[col]), (r["Address"], reason)
            assert ours[f"not_issued_{reason}"] == int(r[SOURCE_NOT_ISSUED[reason]]), (r["Address"], reason)


def test_executed_instruction_totals_equal_ncu(stem, starter_report):
    la = starter_report.launches[0]
    total = golden_raw_number(stem, "inst_executed")
    assert la.sass["inst_executed"].sum() == total
    assert la.value("inst_executed") == total
    # the report's own per-opcode table agrees with the per-PC sums
    per_opcode = la.instances("sass__inst_executed_per_opcode")
    ours = la.sass.groupby("base")["inst_executed"].sum()
    assert {k: v for k, v in ours.items() if v} == {k: v for k, v in per_opcode.items() if v}


def test_every_sass_opcode_has_a_known_class(starter_report):
    sass = starter_report.launches[0].sass
    known = M.known_base_opcodes()
    unknown = sorted(set(sass["base"]) - known)
    assert unknown == [], f"add these opcodes to profiler/data/opcode_classes.toml: {unknown}"
    assert set(sass["opcode_class"]) <= set(M.opcode_classes())


def test_other_is_not_a_dumping_ground(starter_report):
    """OTHER holds only what belongs nowhere else; nothing arithmetic, memory or sync-like."""
    other = set(M.opcode_classes()["OTHER"]["opcodes"])
    assert other <= {"NOP", "USETMAXREG", "PMTRIG"}
    sass = starter_report.launches[0].sass
    in_other = sass[sass["opcode_class"] == "OTHER"]
    assert set(in_other["base"]) <= other
    assert in_other["inst_executed"].sum() < 0.01 * sass["inst_executed"].sum()
    clear = {
        "HMMA": "HMMA", "HGMMA": "HGMMA", "WARPGROUP": "WARPGROUP", "LDSM": "LDSM", "STSM": "STSM",
        "LDS": "LDS", "STS": "STS", "LDG": "LDG", "STG": "STG", "LDGSTS": "LDGSTS",
        "UTMALDG": "UTMA", "UTMASTG": "UTMA", "SYNCS": "SYNCS", "BAR": "BAR", "MEMBAR": "MEMBAR",
        "SHFL": "SHFL", "MUFU": "MUFU", "FFMA": "FP32", "FADD": "FP32", "FMUL": "FP32",
        "HFMA2": "FP16", "IMAD": "INT", "IADD3": "INT", "F2FP": "CONV", "I2F": "CONV",
        "BRA": "BRANCH", "LDL": "LOCAL", "STL": "LOCAL", "DEPBAR": "DEPBAR",
    }
    for op, cls in clear.items():
        assert M.classify_opcode(op + ".X R1, R2") == cls, op


def test_opcode_parsing():
    assert M.full_opcode("@!UP1 SYNCS.EXCH.64 URZ, [UR6], UR4") == "SYNCS.EXCH.64"
    assert M.base_opcode("HGMMA.64x128x16.F32 R24, gdesc[UR16], R24.gsb0") == "HGMMA"
    assert M.base_opcode("@P2   SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R20+URZ+0x48], RZ") == "SYNCS"
    assert M.classify_opcode("WARPGROUP.DEPBAR.LE gsb0, 0x0") == "WARPGROUP"
    assert M.classify_opcode("SOMETHINGNEW R1") == "OTHER"
    assert M.full_opcode("") == ""


# --- cache --------------------------------------------------------------------------------------


def test_warm_load_comes_from_cache_without_ncu_report(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    path = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"]
    cold = load_report(path)

    def boom(_):
        raise AssertionError("ingested again instead of reading the cache")

    monkeypatch.setattr(R, "_ingest", boom)
    warm = load_report(path)
    la_c, la_w = cold.launches[0], warm.launches[0]
    pd.testing.assert_frame_equal(la_c.metrics, la_w.metrics)
    pd.testing.assert_frame_equal(la_c.sass, la_w.sass)
    assert la_w.value("device__attribute_display_name") == "NVIDIA H200"


def test_changed_file_never_hits_a_stale_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    target = tmp_path / "same-name.ncu-rep"
    shutil.copyfile(STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"], target)
    first = load_report(target)
    assert "cudnn" in first.launches[0].kernel
    shutil.copyfile(STARTER_REPORTS["ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"], target)
    os.utime(target, (0, 0))  # even with an old mtime
    second = load_report(target)
    assert "flash_fwd_kernel" in second.launches[0].kernel
    assert second.sha256 != first.sha256


def test_corrupt_cache_entry_is_ignored_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    path = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"]
    good = load_report(path)
    (entry,) = sorted((tmp_path / "cache").glob("*.frames"))
    sealed = entry.read_bytes()
    for damage in (b"not parquet at all", sealed[:-1] + bytes([sealed[-1] ^ 1]),
                   cachefile.seal(b"\0" * 8 + b"sealed, but no parquet", entry.name)):
        entry.write_bytes(damage)
        again = load_report(path)
        pd.testing.assert_frame_equal(good.launches[0].sass, again.launches[0].sass)
        pd.testing.assert_frame_equal(good.launches[0].metrics, again.launches[0].metrics)
        pd.testing.assert_frame_equal(good.launches[0].timeline, again.launches[0].timeline)
        assert entry.read_bytes() == sealed  # rebuilt, byte for byte
    assert not list((tmp_path / "cache").glob("*.tmp"))


@pytest.mark.parametrize("path", [
    STARTER_REPORTS["ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"],
    Path(__file__).parent / "fixtures" / "public" / "esmm-a10g-e22c00d.ncu-rep",  # no warp sampling
    Path(__file__).parent / "public-reports" / "sglang-flyinglandlord" / "h800-sampling-flash-full.ncu-rep",
], ids=["flash", "no-sampling", "multi-launch"])
def test_a_frames_entry_is_read_back_through_the_restricted_unpickler(path):
    """The unpickler's allow-list covers every global the frames need: were one missing, each
    read would fail and rebuild (slow, never wrong), which the other cache tests cannot see."""
    report = load_report(path)  # the session cache: written now or by an earlier test
    frames = R._read_cache(report.sha256)
    assert frames is not None
    assert [la.sass.shape for la in load_report(path).launches] == [la.sass.shape for la in report.launches]


def test_a_forged_frames_entry_cannot_run_code(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    path = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"]
    good = load_report(path)
    (entry,) = sorted((tmp_path / "cache").glob("*.frames"))
    sealed = entry.read_bytes()
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    entry.write_bytes(cachefile.seal(R._FRAMES_MAGIC + pickle.dumps([Evil()], protocol=5), entry.name))
    again = load_report(path)
    assert not marker.exists()
    pd.testing.assert_frame_equal(good.launches[0].sass, again.launches[0].sass)
    assert entry.read_bytes() == sealed  # refused, deleted and rebuilt


def test_a_failed_cache_write_leaves_no_half_written_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "cache"))
    path = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"]
    real = cachefile.os.replace

    def no_space(src, dst):  # the temporary file is written in full; the rename fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cachefile.os, "replace", no_space)
    first = load_report(path)
    assert list((tmp_path / "cache").iterdir()) == []  # no temp file, no entry
    monkeypatch.setattr(cachefile.os, "replace", real)
    again = load_report(path)
    pd.testing.assert_frame_equal(first.launches[0].sass, again.launches[0].sass)
    pd.testing.assert_frame_equal(first.launches[0].metrics, again.launches[0].metrics)
    pd.testing.assert_frame_equal(first.launches[0].timeline, again.launches[0].timeline)
    assert len(list((tmp_path / "cache").glob("*.frames"))) == 1


# --- bad input ----------------------------------------------------------------------------------


def _err(path) -> str:
    with pytest.raises(WhowaitsError) as info:
        load_report(path)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_missing_path(tmp_path):
    assert "no such file" in _err(tmp_path / "nope.ncu-rep")


def test_directory(tmp_path):
    assert "directory" in _err(tmp_path)


def test_not_a_report(tmp_path):
    p = tmp_path / "notes.ncu-rep"
    p.write_text("hello\n")
    assert "not an Nsight Compute report" in _err(p)
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    assert "not an Nsight Compute report" in _err(empty)


@pytest.mark.parametrize("keep", [300, 1_000_000, -10])
def test_truncated_report(tmp_path, keep):
    src = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"].read_bytes()
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(src[:keep])
    assert "truncated" in _err(p)


@pytest.mark.parametrize("keep", [1_000_000, 1_700_000, -10])
def test_truncated_report_is_caught_by_the_reader_too(tmp_path, monkeypatch, keep):
    """With the framing check off (as for a container version it does not know), a cut report
    still fails with one line: ncu_report then reads no launch, or a launch without metrics."""
    monkeypatch.setattr(R, "_CONTAINER", -1)
    p = tmp_path / "cut.ncu-rep"
    p.write_bytes(STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"].read_bytes()[:keep])
    assert "truncated or corrupt" in _err(p)


def test_select_launches(starter_report):
    assert select_launches(starter_report, None) == starter_report.launches
    name = starter_report.launches[0].kernel
    assert select_launches(starter_report, "flash|cudnn") == starter_report.launches
    with pytest.raises(WhowaitsError, match="matches no launch.*kernels there") as info:
        select_launches(starter_report, "^no_such_kernel$")
    assert name[:40] in str(info.value)
    # a report of many kernels (a sweep's) names ten of them and counts the rest, on one line
    many = dataclasses.replace(starter_report, launches=[
        dataclasses.replace(starter_report.launches[0], kernel=f"kernel_{i:02d}") for i in range(25)])
    with pytest.raises(WhowaitsError) as info:
        select_launches(many, "^no_such_kernel$")
    msg = str(info.value)
    assert "kernel_00; kernel_01" in msg and "kernel_09; and 15 more" in msg and "kernel_10" not in msg
    assert "\n" not in msg
    with pytest.raises(WhowaitsError, match="not a valid regex"):
        select_launches(starter_report, "(")


def test_sass_frame_schema(starter_report):
    sass = starter_report.launches[0].sass
    for col in ["launch", "address", "offset", "sass", "opcode", "base", "opcode_class",
                "inst_executed", "samples", "stall_warpgroup_arrive", "not_issued_warpgroup_arrive",
                "source_file", "source_line"]:
        assert col in sass.columns, col
    assert sass["address"].dtype == np.uint64
    assert sass["address"].is_monotonic_increasing
    assert sass["offset"].iat[0] == 0
    # no -lineinfo in the starter reports: source lines are absent, not invented
    assert sass["source_line"].isna().all()


def test_the_cache_key_follows_the_content_of_code_and_data(tmp_path, monkeypatch):
    """No version to bump: one byte changed in a data file or in the ingester changes the key."""
    import shutil

    pkg = tmp_path / "profiler"
    shutil.copytree(Path(R.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cachefile, "PACKAGE", pkg)
    keys = []
    try:
        for edit in (None, "data/opcode_classes.toml", "report.py", "data/gpus.toml"):
            if edit:
                with open(pkg / edit, "a") as f:
                    f.write("\n# edited\n")
            cachefile.fingerprint.cache_clear()
            keys.append(R._cache_path("0" * 64).name)
    finally:
        # the real package back before the memo is cleared: a key computed on the edited copy and left in
        # fingerprint's memo made every later ingest of this process (an xdist worker) miss the session's
        # cache and parse its report again (18 reports, ~3 s, seen 2026-12-01)
        monkeypatch.undo()
        cachefile.fingerprint.cache_clear()
    assert len(set(keys)) == 4, keys
    assert R._cache_path("0" * 64).name == keys[0]  # the unedited copy's key is this checkout's
    assert all(k.startswith("0" * 64 + ".") and k.endswith(".frames") for k in keys)
    assert R._cache_path("0" * 64).parent == R.cache_dir()
