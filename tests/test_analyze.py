"""Single-launch analyses on the committed starter reports, against ncu's own numbers
(tests/golden: raw and source pages of the same files)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
import pytest
from conftest import golden_raw, golden_raw_number, golden_raw_si, golden_source

from profiler import analyze as A
from profiler import metrics as M
from profiler.compare.gaps import optional  # the L2 read fan-out: an optional view, not a gap
from profiler.report import Launch
from test_report import SOURCE_COLUMN

FLASH = "ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"
CUDNN = "ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"
ATTN_FLOPS = 4 * 1 * 64 * 1024 * 1024 * 128  # 4·B·H·S²·D
# What a `--set full` report lacks: the shared-memory level (sm__sass_data_bytes_mem_shared*,
# collected by the whowaits set only) and LDSM's own wavefronts / bank conflicts.
# (less the optional L2 read fan-out's fields: the full set has four of its five counters, tests/test_l2_fanout.py)
FULLSET_SMEM_MISSING = {("roofline.bytes.smem", "WhowaitsRoofline")} | {
    (f"roofline.smem.bytes_by_op.{op}", "WhowaitsRoofline") for op in ("ld", "st", "ldsm", "stsm", "ldgsts", "gmma", "atom")
} | {("roofline.smem.ldsm.wavefronts", "WhowaitsPipes"), ("roofline.smem.ldsm.bank_conflicts", "WhowaitsPipes")}


def _launch(starter_report) -> Launch:
    return starter_report.launches[0]


def test_stall_breakdown_equals_ncu(stem, starter_report):
    df = A.stall_breakdown(_launch(starter_report))
    raw = golden_raw(stem)
    assert list(df["reason"]) == [r for r in M.stall_reasons() if r != "gmma"]  # gh100 has no gmma sampler
    for reason, samples, cpi in zip(df["reason"], df["samples"], df["cycles_per_issue"]):
        assert samples == golden_raw_number(stem, f"smsp__pcsamp_warps_issue_stalled_{reason}")
        ratio = M.cycles_per_issue_metric(reason)
        assert cpi == pytest.approx(float(raw[ratio][1]), abs=1e-6), reason
    assert df["share"].sum() == pytest.approx(1.0)
    assert df.attrs["missing"] == []
    # the per-reason ratios add up to the kernel's warp latency per issued instruction
    total = golden_raw_number(stem, "smsp__average_warp_latency_per_inst_issued.ratio")
    assert df["cycles_per_issue"].sum() == pytest.approx(total, rel=2e-3)


def _golden_cells(stem):
    """(class, reason) -> samples and (class, reason) -> Counter(opcode) from ncu's source page."""
    _, rows = golden_source(stem)
    cells, ops = Counter(), defaultdict(Counter)
    for r in rows:
        cls = M.classify_opcode(r["Source"])
        for reason, col in SOURCE_COLUMN.items():
            n = int(r[col])
            if n:
                cells[(cls, reason)] += n
                ops[(cls, reason)][M.full_opcode(r["Source"])] += n
    return cells, ops


def test_who_waits_equals_cells_from_ncu_source_page(stem, starter_report):
    ww = A.who_waits(_launch(starter_report))
    cells, ops = _golden_cells(stem)
    ours = {(c, r): s for c, r, s in zip(ww["opcode_class"], ww["reason"], ww["samples"]) if r in SOURCE_COLUMN}
    assert ours == dict(cells)
    for c, r, top in zip(ww["opcode_class"], ww["reason"], ww["top_opcode"]):
        if r in SOURCE_COLUMN:
            assert ops[(c, r)][top] == max(ops[(c, r)].values())
    total = golden_raw_number(stem, "smsp__pcsamp_sample_count")
    assert ww["samples"].sum() == total
    assert ww["share"].sum() == pytest.approx(1.0)
    assert list(ww["samples"]) == sorted(ww["samples"], reverse=True)


def test_barrier_stalls_show_the_instruction_they_sit_on(starter_report):
    ww = A.who_waits(_launch(starter_report))
    barrier = ww[ww["reason"] == "barrier"]
    assert len(barrier) > 0
    top = barrier.iloc[0]
    if "cudnn" in starter_report.launches[0].kernel:
        # wgmma.wait_group is sampled as `barrier` (NCU-NOTES): the top barrier cell is it
        assert (top["opcode_class"], top["top_opcode"]) == ("WARPGROUP", "WARPGROUP.DEPBAR.LE")
        assert top["top_sass"].startswith("WARPGROUP.DEPBAR.LE")
    else:
        assert top["top_opcode"] in set(barrier["top_opcode"])


def test_opcode_waits_sorted_with_top_reason(stem, starter_report):
    ow = A.opcode_waits(_launch(starter_report))
    cells, _ = _golden_cells(stem)
    by_class = Counter()
    for (c, _), n in cells.items():
        by_class[c] += n
    wga = A.who_waits(_launch(starter_report))
    wga = wga[wga["reason"] == "warpgroup_arrive"].set_index("opcode_class")["samples"]
    for c, n in wga.items():
        by_class[c] += n
    assert dict(zip(ow["opcode_class"], ow["samples"])) == dict(by_class)
    assert list(ow["samples"]) == sorted(ow["samples"], reverse=True)
    assert ow["share"].sum() == pytest.approx(1.0)


def test_top_instructions_equal_ncu_source_page(stem, starter_report):
    ti = A.top_instructions(_launch(starter_report), n=5)
    _, rows = golden_source(stem)
    ranked = sorted(rows, key=lambda r: -int(r["Warp Stall Sampling (All Samples)"]))
    assert len(ti) == 5
    assert list(ti["samples"]) == [int(r["Warp Stall Sampling (All Samples)"]) for r in ranked[:5]]
    golden = {int(r["Address"], 16): r for r in rows}
    for addr, reason, n in zip(ti["address"], ti["top_reason"], ti["top_reason_samples"]):
        r = golden[int(addr)]
        if reason in SOURCE_COLUMN:
            assert int(r[SOURCE_COLUMN[reason]]) == n
            assert n == max(int(r[c]) for c in SOURCE_COLUMN.values())


def test_short_scoreboard(stem, starter_report):
    la = _launch(starter_report)
    ssc = A.short_scoreboard(la)
    cells, _ = _golden_cells(stem)
    assert dict(zip(ssc["opcode_class"], ssc["samples"])) == {
        c: n for (c, r), n in cells.items() if r == "short_scoreboard"
    }
    assert ssc["samples"].sum() == golden_raw_number(stem, "smsp__pcsamp_warps_issue_stalled_short_scoreboard")
    s = A.summarize_launch(la)["short_scoreboard"]
    assert s["samples"] == ssc["samples"].sum()
    assert s["cycles_per_issue"] == pytest.approx(
        golden_raw_number(stem, "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"), abs=1e-6
    )
    assert sum(s["by_class"].values()) == s["samples"]


def test_barriers_static_and_executed_equal_ncu_source_page(stem, starter_report):
    bar = A.barriers(_launch(starter_report))
    _, rows = golden_source(stem)
    static, executed = Counter(), Counter()
    for r in rows:
        op = M.full_opcode(r["Source"])
        if op.split(".")[0] in M.barrier_opcodes():
            static[op] += 1
            executed[op] += int(r["Instructions Executed"].replace(",", ""))
    assert dict(zip(bar["opcode"], bar["static"])) == dict(static)
    assert dict(zip(bar["opcode"], bar["executed"])) == dict(executed)
    if stem == CUDNN:
        assert {"SYNCS.PHASECHK.TRANS64.TRYWAIT", "WARPGROUP.DEPBAR.LE", "BAR.SYNC.DEFER_BLOCKING"} <= set(static)
    else:
        assert {"BAR.SYNC.DEFER_BLOCKING", "DEPBAR.LE", "LDGDEPBAR"} <= set(static)


def test_tensor_path_from_instruction_counts(stem, starter_report):
    tu = A.tensor_util(_launch(starter_report)).iloc[0]
    _, rows = golden_source(stem)
    counts = Counter()
    for r in rows:
        counts[M.classify_opcode(r["Source"])] += int(r["Instructions Executed"].replace(",", ""))
    assert tu["hmma_inst"] == counts["HMMA"]
    assert tu["hgmma_inst"] == counts["HGMMA"]
    assert tu["path"] == ("hmma" if stem == FLASH else "gmma")
    assert tu["tensor_pipe_pct"] == pytest.approx(
        golden_raw_number(stem, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"), abs=1e-6
    )
    # on gh100 the hmma pipe counter also counts wgmma: it is busy in the cuDNN (wgmma) kernel too
    assert golden_raw_number(stem, "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active") > 40


def test_roofline(stem, starter_report):
    rl = A.roofline(_launch(starter_report))
    q = dict(zip(rl["quantity"], rl["value"]))
    # tensor FLOPs: the path's counters sum to ncu's path-less total = 4·B·H·S²·D
    assert q["flops_tensor_hmma"] + q["flops_tensor_hgmma"] == golden_raw_number(stem, "sm__ops_path_tensor_src_fp16.sum") == ATTN_FLOPS
    assert (q["flops_tensor_hmma"] > 0) == (stem == FLASH)
    assert q["flops"] == pytest.approx(ATTN_FLOPS + q["flops_fp32"] + q["flops_fp16"])
    assert 0 < q["flops_fp32"] < 0.05 * ATTN_FLOPS
    duration_ns = golden_raw_si(stem, "gpu__time_duration.sum")
    # DRAM bytes (rate x duration) agree with the read + write counters
    dram = golden_raw_si(stem, "dram__bytes_read.sum") + golden_raw_si(stem, "dram__bytes_write.sum")
    assert q["bytes_dram"] == pytest.approx(dram, rel=2e-3)
    assert q["bytes_l2"] == pytest.approx(golden_raw_si(stem, "derived__lts__lts2xbar_bytes.sum.per_second") * duration_ns * 1e-9, rel=1e-5)
    for lv in ("l1", "l2", "dram"):
        assert q[f"intensity_{lv}"] == pytest.approx(q["flops"] / q[f"bytes_{lv}"])
    assert q["achieved_flops_per_second"] == pytest.approx(q["flops"] / (duration_ns * 1e-9))
    # ceilings: dense path roofs from the report's own peaks, never the sparse peak
    clock = golden_raw_si(stem, "sm__cycles_elapsed.avg.per_second")
    hgmma = golden_raw_number(stem, "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained")
    sparse = golden_raw_number(stem, "sm__ops_path_tensor_src_fp16.sum.peak_sustained")
    assert q["ceiling_tensor_hgmma"] == pytest.approx(hgmma * clock, rel=1e-5)
    assert q["ceiling_tensor_hgmma"] == pytest.approx(sparse * clock / 2, rel=1e-5)
    assert q["ceiling_tensor_hmma"] < q["ceiling_tensor_hgmma"]
    assert q["ceiling_tensor_hmma"] == pytest.approx(q["ceiling_tensor_hgmma"] * 2 / 3, rel=1e-3)
    used = "ceiling_tensor_hmma" if stem == FLASH else "ceiling_tensor_hgmma"
    assert q["ceiling_compute"] == q["ceiling_tensor"] == q[used]  # the tensor pipe's own roof, no blend with FP32
    assert q["ceiling_tensor_dense"] == q["ceiling_tensor_hgmma"]  # the GPU's dense roof: wgmma's
    assert q["achieved_flops_per_second"] < q["ceiling_compute"]
    assert q["ceiling_bandwidth_dram"] == pytest.approx(
        golden_raw_si(stem, "dram__bytes.sum.peak_sustained") * golden_raw_si(stem, "dram__cycles_elapsed.avg.per_second"), rel=1e-5
    )
    assert 4.5e12 < q["ceiling_bandwidth_dram"] < 5.0e12  # H200: 4.8 TB/s
    # full-set starters: no shared-memory level (ncu's sets lack sm__sass_data_bytes_mem_shared)
    assert np.isnan(q["bytes_smem"]) and np.isnan(q["intensity_smem"])
    assert {(m["field"], m["section"]) for m in rl.attrs["missing"] if not optional(m["field"])} == FULLSET_SMEM_MISSING


def test_launch_stats_equal_ncu(stem, starter_report):
    ls = A.launch_stats(_launch(starter_report)).iloc[0]
    raw = golden_raw(stem)
    assert "({}, {}, {})".format(*ls["grid"]) == raw["Grid Size"][1]
    assert "({}, {}, {})".format(*ls["block"]) == raw["Block Size"][1]
    assert ls["cc"] == raw["CC"][1]
    assert ls["registers_per_thread"] == golden_raw_number(stem, "launch__registers_per_thread")
    assert ls["achieved_occupancy_pct"] == pytest.approx(golden_raw_number(stem, "sm__warps_active.avg.pct_of_peak_sustained_active"), abs=1e-6)
    assert ls["device_name"] == "NVIDIA H200"
    if stem == CUDNN:
        # persistent: one CTA per SM, no cluster launch attribute
        assert ls["grid"] == [132, 1, 1] and ls["cluster"] == [0, 0, 0]
        assert ls["waves_per_sm"] == 1.0


def test_summary_is_the_json_contract(stem, starter_report):
    s = A.summarize_launch(_launch(starter_report), top=7)
    text = json.dumps(s, allow_nan=False)  # plain JSON: no NaN, no numpy types
    assert json.loads(text) == s
    for key in ["report", "launch_index", "kernel", "duration_ns", "stall_samples", "stall_share",
                "stall_cycles_per_issue", "short_scoreboard", "barriers", "tensor_pipe_pct",
                "tensor_path", "tensor_inst", "roofline", "opcode_waits", "who_waits",
                "top_instructions", "launch", "device", "missing"]:
        assert key in s, key
    assert set(s["stall_samples"]) == set(M.stall_reasons()) - {"gmma"}
    assert "warpgroup_arrive" in s["stall_samples"]
    assert sum(s["stall_share"].values()) == pytest.approx(1.0)
    for reason, n in s["stall_samples"].items():
        assert n == golden_raw_number(stem, f"smsp__pcsamp_warps_issue_stalled_{reason}")
    assert s["duration_ns"] == golden_raw_si(stem, "gpu__time_duration.sum")
    assert len(s["top_instructions"]) == 7
    assert set(s["launch"]) >= {"grid", "block", "cluster", "registers_per_thread", "shared_mem_bytes",
                                "waves_per_sm", "achieved_occupancy_pct"}
    assert set(s["roofline"]) >= {"flops", "flops_by_path", "bytes", "intensity", "achieved_tflops", "ceilings"}
    assert s["device"] == {"name": "NVIDIA H200", "cc": "9.0", "sm_count": 132}
    assert {(m["field"], m["section"]) for m in s["missing"] if not optional(m["field"])} == FULLSET_SMEM_MISSING


def _without(launch: Launch, drop) -> Launch:
    """The same real launch with some metrics removed, as a report collected without a section."""
    keep = ~launch.metrics["metric"].map(drop)
    return Launch(launch.report, launch.index, launch.kernel, launch.metrics[keep].reset_index(drop=True), launch.sass)


def test_absent_values_are_null_and_named_in_missing(starter_report):
    la = _launch(starter_report)
    # no WarpStateStats ratios, no roofline rates, no launch stats
    reduced = _without(
        la,
        lambda m: m.startswith(("smsp__average_warps_issue_stalled_", "derived__lts__lts2xbar", "launch__grid", "dram__bytes.sum")),
    )
    s = A.summarize_launch(reduced)
    json.dumps(s, allow_nan=False)
    assert s["stall_cycles_per_issue"]["barrier"] is None
    assert s["roofline"]["bytes"]["l2"] is None and s["roofline"]["intensity"]["l2"] is None
    assert s["roofline"]["bytes"]["dram"] is None
    assert s["launch"]["grid"] is None
    assert s["stall_samples"]["barrier"] is not None  # still there: not a silent 0 either way
    missing = {(m["field"], m["section"]) for m in s["missing"]}
    assert ("stall_cycles_per_issue.barrier", "WarpStateStats") in missing
    assert ("roofline.bytes.l2", "SpeedOfLight_HierarchicalTensorRooflineChart") in missing
    assert ("roofline.bytes.dram", "SpeedOfLight_RooflineChart") in missing
    assert ("launch.grid", "LaunchStats") in missing


def test_no_source_counters_means_null_not_zero(starter_report):
    la = _launch(starter_report)
    bare = Launch(la.report, la.index, la.kernel, la.metrics, la.sass.iloc[0:0][["launch", "address", "offset", "sass", "opcode", "base", "opcode_class"]])
    s = A.summarize_launch(bare)
    fields = {m["field"] for m in s["missing"]}
    assert "who_waits" in fields and "top_instructions" in fields and "barriers" in fields
    assert s["who_waits"] == [] and s["opcode_waits"] == []
    # the path still comes from the report's per-opcode table (InstructionStats)
    assert s["tensor_path"] in ("hmma", "gmma")
    # kernel-level samples do not need SourceCounters
    assert s["stall_samples"]["selected"] > 0


def test_summarize_by_path_and_regex(starter_report_path, stem):
    out = A.summarize(starter_report_path, kernel="flash|cudnn")
    assert len(out) == 1 and out[0]["report"] == str(starter_report_path)
    with pytest.raises(Exception, match="matches no launch"):
        A.summarize(starter_report_path, kernel="^nothing$")


def test_analyses_are_pure(starter_report):
    la = _launch(starter_report)
    before_m, before_s = la.metrics.copy(), la.sass.copy()
    for fn in (A.stall_breakdown, A.who_waits, A.opcode_waits, A.top_instructions, A.short_scoreboard,
               A.barriers, A.tensor_util, A.roofline, A.launch_stats):
        a, b = fn(la), fn(la)
        pd.testing.assert_frame_equal(a, b)
        assert fn.__doc__ and "Columns" in fn.__doc__ or "column" in fn.__doc__.lower()
    pd.testing.assert_frame_equal(before_m, la.metrics)
    pd.testing.assert_frame_equal(before_s, la.sass)
    assert np.all(la.sass["address"].to_numpy() == before_s["address"].to_numpy())


def test_reasons_follow_the_chip_sampler(starter_report):
    """A sampler without warpgroup_arrive (pre-Hopper) and with a reason we do not know (newer
    chips): the unknown one is reported, the absent one is null and explained."""
    la = _launch(starter_report)
    old = "smsp__pcsamp_warps_issue_stalled_warpgroup_arrive"
    renamed = la.metrics.copy()
    renamed["metric"] = renamed["metric"].str.replace(old, "smsp__pcsamp_warps_issue_stalled_future_reason", regex=False)
    other = Launch(la.report, la.index, la.kernel, renamed, la.sass)
    sb = A.stall_breakdown(other).set_index("reason")
    assert pd.isna(sb.loc["warpgroup_arrive", "samples"])
    assert sb.loc["future_reason", "samples"] == la.value(old)
    assert sb["share"].sum() == pytest.approx(1.0)
    gone = {m["field"]: m["section"] for m in sb.attrs["missing"]}
    assert "not a stall reason of this GPU's sampler" in gone["stall_samples.warpgroup_arrive"]
    s = A.summarize_launch(other)
    assert s["stall_samples"]["warpgroup_arrive"] is None and s["stall_share"]["warpgroup_arrive"] is None
    assert M.sampled_reasons(renamed["metric"])[-1] == "future_reason"


def test_only_the_ingestion_layer_imports_ncu_report():
    import re
    from pathlib import Path

    import profiler

    root = Path(profiler.__file__).parent
    importers = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if re.search(r"^\s*(import ncu_report|from ncu_report\b)", p.read_text(), re.M)
    )
    # the ingester and its disassembly worker process (profiler/sass_worker.py)
    assert importers == ["report.py", "sass_worker.py"]
