"""Honest roofs: each pipe's own roof, no blend; tensor_roof_pct on one scale for every path.

Golden values are ncu's own numbers from ``ncu --import F --page raw --csv`` of the two full-set starter
reports (tests/golden/*.raw.csv):

- cuDNN (wgmma): ``sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.pct_of_peak_sustained_elapsed``
  = 61.967276 % is ncu's share of the dense wgmma roof; our ``tensor_roof_pct`` must be it.
- SDPA flash (mma.sync): ncu has no hgmma-path share for an HMMA kernel, but
  ``sm__ops_path_tensor_src_fp16.sum.pct_of_peak_sustained_elapsed`` = 16.547415 % is against the path-less
  *sparse* peak (1,081,344 FLOP/cycle), which is exactly 2x the dense wgmma peak (540,672 FLOP/cycle, both in
  the same CSV): so the share of the dense roof is 2 x 16.547415 = 33.09483 %.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from profiler.analyze import summarize
from profiler.compare.merge import merge_launches

try:
    from conftest import STARTER_REPORTS, golden_raw_number, golden_raw_si
except ImportError:  # tests/ imported as a package
    from tests.conftest import STARTER_REPORTS, golden_raw_number, golden_raw_si

ROOT = Path(__file__).resolve().parents[1]
CUDNN = "ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"
FLASH = "ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"


@pytest.fixture(scope="module")
def summaries():
    return {stem: summarize(path)[0] for stem, path in STARTER_REPORTS.items()}


def test_tensor_roof_pct_is_ncus_share_of_the_dense_wgmma_roof(summaries):
    ncu_cudnn = golden_raw_number(CUDNN, "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.pct_of_peak_sustained_elapsed")
    assert ncu_cudnn == 61.967276
    assert summaries[CUDNN]["tensor_roof_pct"] == pytest.approx(ncu_cudnn, abs=5e-4)
    sparse = golden_raw_number(FLASH, "sm__ops_path_tensor_src_fp16.sum.peak_sustained")
    dense = golden_raw_number(FLASH, "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained")
    assert (sparse, dense) == (1081344, 540672)
    ncu_flash = golden_raw_number(FLASH, "sm__ops_path_tensor_src_fp16.sum.pct_of_peak_sustained_elapsed") * sparse / dense
    assert summaries[FLASH]["tensor_roof_pct"] == pytest.approx(ncu_flash, abs=5e-4)  # 33.09483
    # tensor_pipe_pct stays against each path's own peak: flash (mma.sync) looks busier than its roof share
    assert summaries[FLASH]["tensor_pipe_pct"] > 50 > summaries[FLASH]["tensor_roof_pct"]


@pytest.mark.parametrize("stem", [CUDNN, FLASH])
def test_each_pipe_has_its_own_roof_with_its_clock(summaries, stem):
    s = summaries[stem]
    r, c = s["roofline"], s["roofline"]["ceilings"]
    clock = golden_raw_si(stem, "sm__cycles_elapsed.avg.per_second")
    assert c["clock_hz"]["sm"] == pytest.approx(clock, rel=1e-6)
    assert c["clock_hz"]["dram"] == pytest.approx(golden_raw_si(stem, "dram__cycles_elapsed.avg.per_second"), rel=1e-6)
    # the tensor path's dense roof = its counter's peak per cycle x the SM clock (ncu's peak_sustained_elapsed.per_second)
    hgmma = golden_raw_number(stem, "sm__ops_path_tensor_op_hgmma_src_fp16_sparsity_off.sum.peak_sustained_elapsed.per_second")
    assert c["tensor_dense_tflops"] == pytest.approx(hgmma / 1e12, rel=1e-5)
    assert c["tensor_hgmma_tflops"] == pytest.approx(hgmma / 1e12, rel=1e-5)
    # FP32 roof: 2 FLOP per FFMA x ncu's FFMA peak per cycle x the SM clock
    ffma = golden_raw_number(stem, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained")
    assert c["fp32_tflops"] == pytest.approx(2 * ffma * clock / 1e12, rel=1e-5)
    # no blend: ~1% of the FLOPs in FP32 does not pull the compute roof below the tensor path's roof
    assert r["compute_pipe"] == "tensor"
    path = "tensor_hgmma_tflops" if stem == CUDNN else "tensor_hmma_tflops"
    assert c["compute_tflops"] == c["tensor_tflops"] == c[path]
    assert 0 < r["flops_by_path"]["fp32"] < 0.02 * r["flops"]
    # intensities as ncu defines them (tensor FLOPs), beside the total
    for lv, b in r["bytes"].items():
        if b:
            assert r["intensity_tensor"][lv] == pytest.approx(r["flops_tensor"] / b)
            assert r["intensity"][lv] == pytest.approx(r["flops"] / b)
    assert r["flops_tensor"] == golden_raw_number(stem, "sm__ops_path_tensor_src_fp16.sum")
    dur = golden_raw_si(stem, "gpu__time_duration.sum")
    assert r["achieved_tensor_tflops"] == pytest.approx(r["flops_tensor"] / dur / 1e3)
    assert s["tensor_roof_pct"] == pytest.approx(100 * r["achieved_tensor_tflops"] / c["tensor_dense_tflops"])


def test_committed_ladder_roofs_by_hand():
    """The issue's figures: v07's roof is mma.sync's 624 TFLOP/s (the blend said 569), cuDNN's wgmma 907 (804)
    (re-collected 2026-12-01 06:51: SM clocks 1.7306 / 1.6774 GHz).
    By hand: 2730.67 FLOP/cycle/SM (mma.sync) x 132 SMs x the report's SM clock; 4096 for wgmma."""
    rep = ROOT / "reports" / "h200"
    v07 = summarize(rep / "v07_tuned" / "b1_h64_s1024_d128_fp16.ncu-rep")[0]
    cud = summarize(rep / "ext-sdpa-cudnn" / "b1_h64_s1024_d128_fp16.ncu-rep")[0]
    for s, per_sm, want in ((v07, 8192 / 3, 623.8), (cud, 4096, 906.9)):
        c = s["roofline"]["ceilings"]
        assert c["compute_tflops"] == pytest.approx(per_sm * 132 * c["clock_hz"]["sm"] / 1e12, rel=1e-4)
        assert c["compute_tflops"] == pytest.approx(want, abs=0.05)
    # one scale: v07's tensor roof share is ~2/3 of its pipe share (mma.sync peaks at 2/3 of wgmma)
    assert v07["tensor_roof_pct"] < v07["tensor_pipe_pct"] * 2 / 3 * 1.05
    assert cud["tensor_roof_pct"] > v07["tensor_roof_pct"]


def test_merged_launches_keep_the_roof_share(summaries):
    s = summaries[CUDNN]
    m = merge_launches([s, copy.deepcopy(s)])
    assert m["tensor_roof_pct"] == pytest.approx(s["tensor_roof_pct"], rel=1e-9)
    assert m["roofline"]["compute_pipe"] == "tensor"
    assert m["roofline"]["intensity_tensor"] == pytest.approx(s["roofline"]["intensity_tensor"])


def test_migration_shows_both_scales_and_both_intensities():
    from profiler.compare import migrate

    m = migrate(["v07_tuned", "ext-sdpa-cudnn"])
    t = m.table.set_index("version")
    for v in ("v07_tuned", "ext-sdpa-cudnn"):
        assert t.loc[v, "tensor_roof_pct"] < t.loc[v, "tensor_pipe_pct"]
        assert t.loc[v, "intensity_tensor_dram"] < t.loc[v, "intensity_dram"]  # tensor FLOPs < all FLOPs
    assert t.loc["v07_tuned", "compute_roof_tflops"] == pytest.approx(623.8, abs=0.05)
    assert t.loc["ext-sdpa-cudnn", "compute_roof_tflops"] == pytest.approx(906.9, abs=0.05)
