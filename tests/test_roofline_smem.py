"""The shared-memory level of the roofline, on the committed H200 reports.

The whowaits-set reports (reports/h200/<subject>/) carry sm__sass_data_bytes_mem_shared and its per-op
counters; the `--set full` starters (…-fullset/) do not, so there the level is null and named in `missing`.
Raw values are read straight from the report with ncu_report (not through profiler.report).
"""

from __future__ import annotations

import math
from pathlib import Path

import ncu_report
import numpy as np
import pytest
from typer.testing import CliRunner

from profiler import analyze as A
from profiler.analyze.kernel import LEVELS, SMEM_OPS
from profiler.compare.gaps import optional
from profiler.cli import app
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16"
LADDER = ["v01_naive", "v02_smem_tiling", "v03_tensor_cores", "v04_swizzle_cp_async", "v05_double_buffer",
          "v06_softmax_fusion", "v07_tuned"]
SUBJECTS = LADDER + ["ext-sdpa-flash", "ext-sdpa-cudnn"]
FULLSET = ["ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset"]
TOTAL = "sm__sass_data_bytes_mem_shared.sum"


def _path(subject: str) -> Path:
    return ROOT / "reports" / "h200" / subject / f"{SHAPE}.ncu-rep"


def _raw(subject: str) -> dict[str, float]:
    action = ncu_report.load_report(str(_path(subject))).range_by_idx(0).action_by_idx(0)
    names = [n for n in action.metric_names()
             if n.startswith(("sm__sass_data_bytes_mem_shared", "sm__sass_l1tex_data_", "l1tex__cycles_elapsed",
                              "device__attribute_multiprocessor_count"))]
    return {n: action.metric_by_name(n).value() for n in names}


@pytest.fixture(scope="module")
def launches():
    return {s: load_report(_path(s)).launches[0] for s in SUBJECTS + FULLSET}


def _q(launch) -> dict:
    rl = A.roofline(launch)
    # the L2 read fan-out's counters came after these reports: an optional view (tests/test_l2_fanout.py), not a gap
    return dict(zip(rl["quantity"], rl["value"])), [m for m in rl.attrs["missing"] if not optional(m["field"])]


@pytest.mark.parametrize("subject", SUBJECTS)
def test_smem_bytes_equal_the_raw_counters(subject, launches):
    q, gone = _q(launches[subject])
    raw = _raw(subject)
    assert gone == []
    for op in SMEM_OPS:
        assert q[f"bytes_smem_{op}"] == raw[f"sm__sass_data_bytes_mem_shared_op_{op}.sum"]
    gmma = raw["sm__sass_data_bytes_mem_shared_op_gmma.sum"]
    if gmma == 0:  # no wgmma: the level is the raw total, to the byte
        assert q["bytes_smem"] == raw[TOTAL]
    else:  # the total leaves the wgmma operand reads out on gh100: they are added
        assert q["bytes_smem"] == raw[TOTAL] + gmma
    for lv in LEVELS:
        if q[f"bytes_{lv}"]:
            assert q[f"intensity_{lv}"] == pytest.approx(q["flops"] / q[f"bytes_{lv}"], rel=1e-12)
    # roof: 128 B/cycle/SM (gpus.toml) x the report's SM count x the L1 clock the kernel ran at
    bw = 128 * raw["device__attribute_multiprocessor_count"] * raw["l1tex__cycles_elapsed.avg.per_second"]
    assert q["ceiling_bandwidth_smem"] == pytest.approx(bw, rel=1e-12)
    if q["bytes_smem"]:
        # attainable: the roof of the pipe carrying most FLOPs, at that pipe's intensity (tensor FLOPs / bytes
        # for the tensor rungs, FP32 FLOPs / bytes for the CUDA-core ones); pipes are never blended
        pipe = max(("tensor", "fp32", "fp16"), key=lambda k: q[f"flops_{k}"])
        assert q["ceiling_compute"] == q[f"ceiling_{'tensor' if pipe == 'tensor' else pipe}"]
        assert q["attainable_smem"] == pytest.approx(min(q["ceiling_compute"], q[f"flops_{pipe}"] / q["bytes_smem"] * bw))


def test_cudnn_total_leaves_the_wgmma_operands_out():
    # the measured fact the gmma addition rests on: the cuDNN (wgmma) kernel's total is its other ops exactly
    raw = _raw("ext-sdpa-cudnn")
    others = sum(raw[f"sm__sass_data_bytes_mem_shared_op_{op}.sum"] for op in ("ld", "st", "ldsm", "stsm", "atom"))
    assert raw[TOTAL] == others
    assert raw["sm__sass_data_bytes_mem_shared_op_gmma.sum"] > 10 * raw[TOTAL]


def test_ladder_story_in_shared_memory(launches):
    q = {s: _q(launches[s])[0] for s in SUBJECTS}
    assert q["v01_naive"]["bytes_smem"] == 0 and math.isnan(q["v01_naive"]["intensity_smem"])  # no smem: no level
    # v03 -> v04: the swizzle removes LDSM bank conflicts, 8-way -> conflict-free, same LDSM bytes
    assert q["v03_tensor_cores"]["ldsm_conflict_ways"] == pytest.approx(8.0)
    raw = _raw("v03_tensor_cores")
    wf = raw["sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum"]
    bc = raw["sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum"]
    assert q["v03_tensor_cores"]["ldsm_conflict_ways"] == wf / (wf - bc)
    for v in LADDER[3:]:
        assert q[v]["ldsm_conflict_ways"] == 1.0
    assert q["v04_swizzle_cp_async"]["bytes_smem_ldsm"] == q["v03_tensor_cores"]["bytes_smem_ldsm"]
    # cp.async: v04 writes shared memory through LDGSTS, v03 through STS
    assert q["v03_tensor_cores"]["bytes_smem_ldgsts"] == 0 < q["v04_swizzle_cp_async"]["bytes_smem_ldgsts"]
    # the L1 term misses cp.async + LDSM traffic: from v04 on it is far below the shared-memory bytes
    assert q["v04_swizzle_cp_async"]["bytes_l1"] < 0.01 * q["v04_swizzle_cp_async"]["bytes_smem"]
    # bigger Q tiles (v07: 128 rows) halve the K/V tile reads per FLOP: higher intensity
    assert q["v07_tuned"]["intensity_smem"] > 1.5 * q["v06_softmax_fusion"]["intensity_smem"]
    # wgmma (cuDNN) reads operands straight from shared memory, no LDSM
    assert q["ext-sdpa-cudnn"]["bytes_smem_ldsm"] == 0 and q["ext-sdpa-cudnn"]["bytes_smem_gmma"] > 0


@pytest.mark.parametrize("subject", FULLSET)
def test_fullset_reports_have_no_smem_level_and_say_so(subject, launches):
    q, gone = _q(launches[subject])
    for k in ("bytes_smem", "intensity_smem", "attainable_smem", "ldsm_conflict_ways",
              *(f"bytes_smem_{op}" for op in SMEM_OPS)):
        assert np.isnan(q[k]), k  # never a silent 0
    assert q["ceiling_bandwidth_smem"] > 0  # the roof needs only device attributes and the L1 clock
    assert {"field": "roofline.bytes.smem", "section": "WhowaitsRoofline"} in gone
    s = A.summarize_launch(launches[subject])
    assert s["roofline"]["bytes"]["smem"] is None and s["roofline"]["intensity"]["smem"] is None
    assert s["roofline"]["smem"]["bytes_by_op"]["ldsm"] is None


def test_show_prints_the_smem_row_and_ldsm_conflicts():
    res = CliRunner().invoke(app, ["show", str(_path("v03_tensor_cores"))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    smem_row = next(line for line in res.output.splitlines() if "SMEM" in line)
    assert "2.75 GB" in smem_row and "12.6" in smem_row  # bytes, FLOP/byte
    assert "LDSM bank conflicts: 8.00-way" in res.output
    res = CliRunner().invoke(app, ["show", str(_path("ext-sdpa-flash-fullset"))], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    assert "no shared-memory level: needs ncu section(s) WhowaitsRoofline" in res.output  # one line per report, not one per field
    res = CliRunner().invoke(app, ["show", str(_path("ext-sdpa-flash-fullset")), "--verbose"], env={"COLUMNS": "400"})
    assert "roofline.bytes.smem ← WhowaitsRoofline" in res.output

