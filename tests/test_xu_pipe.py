"""The XU (MUFU) pipe beside the tensor pipe, on the committed reports.

Golden values, and where they come from:

- v20_three_consumers at b4_h32_s4096_d64 (docs/ladder-iv.md: XU 57.7% vs tensor 55.8%): ncu's own
  ``sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active`` = 57.68365287107633 and
  ``sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active`` = 55.849720401826886, read with NVIDIA's
  ``ncu_report`` module straight from the report (``ncu_report.load_report(path).range_by_idx(0).action_by_idx(0)[m]
  .as_double()``, 2026-12-02; the test reads them again the same way, apart from whowaits' ingestion).
- The two full-set starter reports: ncu's CLI output (``ncu --import F --page raw --csv``, tests/golden/*.raw.csv):
  cuDNN 34.279299 %, FlashAttention-2 18.596957 %.
- The SASS-derived figure against ncu's counter: every launch of a committed report that has both (cc 9.0 H200 and
  H800, cc 8.0 A100) agrees to 1e-6: 23 launches, 21 of them with a non-zero XU %.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profiler.analyze import summarize
from profiler.analyze.xu import NO_VALUE, NOT_COLLECTED, xu_busier, xu_figure, xu_pipe
from profiler.report import load_report

try:
    from clirun import whowaits
    from conftest import STARTER_REPORTS, golden_raw_number
except ImportError:  # tests/ imported as a package
    from tests.clirun import whowaits
    from tests.conftest import STARTER_REPORTS, golden_raw_number

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "reports" / "h200"
D64 = H200 / "v20_three_consumers" / "b4_h32_s4096_d64_fp16.ncu-rep"
V07 = H200 / "v07_tuned" / "b1_h64_s1024_d128_fp16.ncu-rep"
XU_METRIC = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
TENSOR_METRIC = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"

#: every committed report whose launches hold ncu's XU counter (a grep of the report files for
#: ``inst_executed_pipe_xu``, less the A10G ones, which hold only the elapsed variant and no per-PC counts)
WITH_COUNTER = [
    *(H200 / v / f"{s}.ncu-rep" for v, shapes in {
        "v20_three_consumers": ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16_causal", "b4_h32_s4096_d64_fp16"),
        "v21_causal_pairs": ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16", "b4_h16_s4096_d128_fp16_causal",
                             "b4_h32_s4096_d64_fp16"),
        "v22_d64_stages4": ("b1_h64_s1024_d128_fp16", "b4_h32_s4096_d64_fp16"),
        "v24_d64_stages3": ("b1_h64_s1024_d128_fp16", "b4_h32_s4096_d64_fp16"),
        "ext-sdpa-cudnn-fullset": ("b1_h64_s1024_d128_fp16",),
        "ext-sdpa-flash-fullset": ("b1_h64_s1024_d128_fp16",),
    }.items() for s in shapes),
    ROOT / "tests" / "public-reports" / "cutlass-panjd123" / "report-s4.ncu-rep",
    ROOT / "tests" / "public-reports" / "cutlass-panjd123" / "report-s8.ncu-rep",
    ROOT / "tests" / "public-reports" / "cutlass-panjd123" / "report-s8-persist.ncu-rep",
    ROOT / "tests" / "public-reports" / "sglang-flyinglandlord" / "h800-sampling-flash-full.ncu-rep",
]


def _ncu_report_values(path: Path, *metrics: str) -> list[float]:
    ncu_report = pytest.importorskip("ncu_report")
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    return [action[m].as_double() for m in metrics]


@pytest.fixture(scope="module")
def d64():
    return summarize(str(D64))[0]


def test_d64_xu_pipe_is_ncus_counter_and_above_the_tensor_pipe(d64):
    xu, tensor = _ncu_report_values(D64, XU_METRIC, TENSOR_METRIC)
    assert (xu, tensor) == (57.68365287107633, 55.849720401826886)
    assert d64["xu_pipe_pct"] == xu and d64["tensor_pipe_pct"] == tensor
    assert round(d64["xu_pipe_pct"], 1) == 57.7 and round(d64["tensor_pipe_pct"], 1) == 55.8  # docs/ladder-iv.md
    assert d64["xu_pipe_pct_sass"] == pytest.approx(xu, abs=1e-6)
    assert xu_figure(d64) == (xu, "ncu") and xu_busier(d64) is True
    assert not [m for m in d64["missing"] if m["field"].startswith("xu_")]


@pytest.mark.parametrize("stem", sorted(STARTER_REPORTS))
def test_full_set_reports_give_ncus_printed_value(stem):
    s = summarize(STARTER_REPORTS[stem])[0]
    assert s["xu_pipe_pct"] == pytest.approx(golden_raw_number(stem, XU_METRIC), abs=5e-7)
    assert s["xu_pipe_pct_sass"] == pytest.approx(s["xu_pipe_pct"], abs=1e-6)
    assert xu_busier(s) is False  # d128: the tensor pipe is the busier one


def test_sass_figure_equals_ncus_counter_on_every_report_with_both():
    both, nonzero, ccs = 0, 0, set()
    for path in WITH_COUNTER:
        for launch in load_report(str(path)).launches:
            got, _ = xu_pipe(launch)
            if got["xu_pipe_pct"] is None or got["xu_pipe_pct_sass"] is None:
                continue
            assert got["xu_pipe_pct_sass"] == pytest.approx(got["xu_pipe_pct"], abs=1e-6), (path, launch.index)
            both += 1
            nonzero += got["xu_pipe_pct"] > 0
            ccs.add((launch.get("cc_major")[0], launch.get("cc_minor")[0]))
    assert (both, nonzero) == (23, 21) and ccs == {(8.0, 0.0), (9.0, 0.0)}


def test_a_report_without_the_counter_gives_null_and_why_and_the_sass_figure():
    s = summarize(str(V07))[0]
    assert s["xu_pipe_pct"] is None
    gone = {m["field"]: m for m in s["missing"]}
    assert gone["xu_pipe_pct"] == {"field": "xu_pipe_pct", "section": "WhowaitsPipes", "reason": NOT_COLLECTED}
    # MUFU (and I2F/F2I) warp instructions over 0.5 per SM per active cycle: v07 issues its exponentials on the
    # mma.sync path with the XU pipe a third as busy as the tensor pipe
    assert s["xu_pipe_pct_sass"] == pytest.approx(19.2016, abs=1e-4) and s["tensor_pipe_pct"] > 50
    assert "xu_pipe_pct_sass" not in gone and xu_figure(s) == (s["xu_pipe_pct_sass"], "sass")
    assert json.loads(json.dumps(s, allow_nan=False))["xu_pipe_pct"] is None


def test_no_figure_where_nothing_supplies_it():
    # A10G: no per-PC or per-opcode executed counts, and only the elapsed XU variant
    for launch in load_report(str(ROOT / "tests" / "fixtures" / "public" / "esmm-a10g-e22c00d.ncu-rep")).launches[:1]:
        got, gone = xu_pipe(launch)
        assert got == {"xu_pipe_pct": None, "xu_pipe_pct_sass": None}
        assert [(m["field"], m["section"]) for m in gone] == [("xu_pipe_pct", "WhowaitsPipes"),
                                                               ("xu_pipe_pct_sass", "SourceCounters")]
    # RTX 4070 (cc 8.9): ncu's counter is there (0 %), the SASS rate was not measured on 8.9; launch 1 holds the
    # metric with no value (ncu could not measure it)
    launches = load_report(str(ROOT / "tests" / "public-reports" / "bbastar" / "rtx4070-astar-full.ncu-rep")).launches
    got, gone = xu_pipe(launches[0])
    assert got == {"xu_pipe_pct": 0.0, "xu_pipe_pct_sass": None}
    assert [m["field"] for m in gone] == ["xu_pipe_pct_sass"] and "not 8.9" in gone[0]["reason"]
    got, gone = xu_pipe(launches[1])
    assert got["xu_pipe_pct"] is None and gone[0]["reason"] == NO_VALUE


def test_show_prints_it_beside_the_tensor_pipe():
    proc = whowaits("show", str(D64), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("Tensor cores:"))
    assert lines[i + 1].startswith("XU (MUFU) pipe: 57.7% of its peak (ncu's counter; 57.7% from the SASS)")
    assert "above the tensor pipe's 55.8%" in lines[i + 1]
    proc = whowaits("show", str(V07), env={"COLUMNS": "200"})
    assert "XU (MUFU) pipe: 19.2% of its peak (from the SASS" in proc.stdout
    assert "above the tensor pipe" not in proc.stdout
