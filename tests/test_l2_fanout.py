"""The L2 read fan-out (``roofline.l2_reads``): SMs served per L2 read for the SMs.

- the arithmetic on what ncu printed for real kernels: the ``ncu --csv --page raw`` outputs committed under
  reports/h200/ladder4/ (v34/v36/v37 at b4_h16_s4096, T1111; v21/v26, T2258) go through the report reader's
  own metrics frame (:func:`profiler.report._metrics_frame`) into a :class:`~profiler.report.Launch`, and from
  there through the roofline and the summary as a report's values would;
- every committed report with the counters (ncu's full set has four of the five) gives ncu's ratio, > 0; the list
  of such reports is held equal to :data:`WITH_COUNTERS`, so a report committed with them is seen;
- a report without them: null fields named in ``missing`` with a reason, ``show`` says "not collected", and the
  gap note and the gate's ``no_missing`` read as before (slow: every committed report).
"""

from __future__ import annotations

import csv
import json
import math
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT

SECTOR = 32
DELIVERED = "l1tex__m_xbar2l1tex_read_bytes.sum"
SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
REQUESTS = "lts__t_requests_srcunit_tex_op_read.sum"
MISS = "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum"
MULTICAST = "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld_dest_multicast.sum"

T1111 = ROOT / "reports/h200/ladder4/2026-12-03T1111/l2-b4_h16_s4096_d128_fp16"
T2258 = ROOT / "reports/h200/ladder4/2026-12-02T2258"
CSVS = {"v34": T1111 / "l2-v34_q_regs.csv", "v36": T1111 / "l2-v36_warp_epilogue_only.csv",
        "v37": T1111 / "l2-v37_stmatrix_epilogue.csv", "v21": T2258 / "l2-v21_causal_pairs.csv",
        "v26": T2258 / "l2-v26_kv_multicast.csv"}

_PREFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _raw_csv(path: Path) -> tuple[str, dict[str, tuple[float, str]]]:
    """(kernel, metric -> (value in base units, unit)) of the one launch of an ``ncu --csv --page raw`` output
    (ncu's own log lines before the table are skipped)."""
    rows = list(csv.reader(ln for ln in path.read_text().splitlines() if ln.startswith('"')))
    header, units, values = rows[0], rows[1], rows[2]
    assert len(rows) == 3, f"{path}: one launch expected"
    out = {}
    for h, u, v in zip(header, units, values):
        try:
            x = float(v.replace(",", ""))
        except ValueError:
            continue
        if u[:1] in _PREFIX and u[1:].startswith(("byte", "sector", "request")):
            x, u = x * _PREFIX[u[0]], u[1:]
        out[h] = (x, u)
    return dict(zip(header, values))["Kernel Name"], out


@lru_cache(maxsize=None)
def _csv_launch(name: str):
    """A :class:`~profiler.report.Launch` of the CSV's scalars, built as the report reader builds one (its
    metrics frame), with no SASS."""
    import pandas as pd

    from profiler.report import Launch, _metrics_frame

    kernel, metrics = _raw_csv(CSVS[name])
    rows = [(0, kernel, m, None, v, None, u) for m, (v, u) in metrics.items()]
    frame = _metrics_frame(rows)
    frame.insert(0, "report", str(CSVS[name]))
    sass = pd.DataFrame({c: pd.Series(dtype=object) for c in ("launch", "address", "offset", "sass", "opcode",
                                                               "base", "opcode_class")})
    return Launch(str(CSVS[name]), 0, kernel, frame, sass), metrics


def _quantities(launch) -> dict:
    from profiler.analyze import roofline

    q = roofline(launch)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in zip(q["quantity"], q["value"])}


@pytest.mark.parametrize("name", sorted(CSVS))
def test_fanout_is_delivered_bytes_over_l2_sector_bytes(name):
    launch, raw = _csv_launch(name)
    q = _quantities(launch)
    delivered, sectors = raw[DELIVERED][0], raw[SECTORS][0]
    assert raw[DELIVERED][1] == "byte" and raw[SECTORS][1] == "sector"
    assert q["l2_read_delivered_bytes"] == delivered and q["l2_read_sectors"] == sectors
    assert q["l2_read_requests"] == raw[REQUESTS][0]
    assert q["l2_read_bytes"] == sectors * SECTOR
    assert q["l2_read_fanout"] == pytest.approx(delivered / (sectors * SECTOR), rel=1e-12)
    # these runs queried neither the misses of the reads alone nor the multicast bytes: null, not 0
    assert MISS not in raw and MULTICAST not in raw
    assert q["l2_read_miss_sectors"] is None and q["l2_read_miss_share"] is None
    assert q["l2_read_multicast_bytes"] is None and q["l2_read_multicast_share"] is None


def test_the_fast_variant_shares_its_l2_reads_most():
    """T1111: 4.362 GB delivered to the SMs in all three, 55.95 M L2 read sectors in v34 against 73.70 M / 78.47 M:
    one L2 read served 2.44 SMs in v34, 1.85 in v36 and 1.74 in v37 (docs/ladder-iv.md); T2258: v21 shares more
    than v26."""
    fan = {n: _quantities(_csv_launch(n)[0])["l2_read_fanout"] for n in CSVS}
    delivered = {n: _csv_launch(n)[1][DELIVERED][0] for n in CSVS}
    assert len(set(delivered.values())) == 1 and delivered["v34"] == 4_362_076_160
    assert _csv_launch("v34")[1][SECTORS][0] == 55_946_648
    assert fan["v34"] == pytest.approx(2.4365, abs=5e-4)
    assert fan["v36"] == pytest.approx(1.8497, abs=5e-4)
    assert fan["v37"] == pytest.approx(1.7372, abs=5e-4)
    assert fan["v34"] > fan["v36"] > fan["v37"] > 1
    assert fan["v21"] > fan["v26"] > 1


def test_the_summary_carries_the_csv_launch():
    """The same launch through the summary: roofline.l2_reads, and the counters the run did not query named in
    ``missing`` with the reason, never in the gap note or the gate's no_missing."""
    from profiler.analyze import summarize_launch
    from profiler.check.fields import missing as gate_missing
    from profiler.cli.show import _l2_reads_line
    from profiler.compare.gaps import gaps

    launch, raw = _csv_launch("v34")
    s = summarize_launch(launch)
    l2 = s["roofline"]["l2_reads"]
    assert l2["fanout"] == pytest.approx(raw[DELIVERED][0] / (raw[SECTORS][0] * SECTOR), rel=1e-12)
    assert l2["bytes"] == raw[SECTORS][0] * SECTOR
    gone = {m["field"]: m for m in s["missing"] if m["field"].startswith("roofline.l2_reads.")}
    assert set(gone) == {"roofline.l2_reads.miss_sectors", "roofline.l2_reads.multicast_bytes"}
    assert all(m["section"] == "WhowaitsRoofline" and m["reason"].startswith("not collected") for m in gone.values())
    assert not any(f["field"].startswith("roofline.l2_reads.") for f in gaps(s).fields)
    assert not any(g.startswith("roofline.l2_reads.") for g in gate_missing(s))
    line = _l2_reads_line(s)
    assert "1.79 GB" in line and "delivered 4.36 GB" in line and "fan-out 2.44×" in line and "miss" not in line


def test_merged_launches_add_the_counters_and_recompute_the_ratio():
    from profiler.analyze import summarize_launch
    from profiler.compare.merge import merge_launches

    a, b = (summarize_launch(_csv_launch(n)[0]) for n in ("v34", "v36"))
    m = merge_launches([a, b])["roofline"]["l2_reads"]
    ra, rb = a["roofline"]["l2_reads"], b["roofline"]["l2_reads"]
    assert m["sectors"] == ra["sectors"] + rb["sectors"]
    assert m["fanout"] == pytest.approx((ra["delivered_bytes"] + rb["delivered_bytes"]) / (m["sectors"] * SECTOR))
    assert m["miss_share"] is None


def test_diff_rows_before_and_after():
    import pandas as pd

    from profiler.analyze import summarize_launch
    from profiler.compare.diff import diff

    a, b = (summarize_launch(_csv_launch(n)[0]) for n in ("v34", "v36"))
    rows = {r["metric"]: r for r in diff(a, b, "v34", "v36").metrics.to_dict(orient="records")}
    fan = rows["l2_read_fanout"]
    assert fan["a"] == pytest.approx(2.4365, abs=5e-4) and fan["b"] == pytest.approx(1.8497, abs=5e-4)
    assert fan["ratio"] == pytest.approx(fan["b"] / fan["a"]) and fan["significant"]
    assert rows["l2_read_bytes"]["b"] / rows["l2_read_bytes"]["a"] == pytest.approx(73_695_468 / 55_946_648)
    assert rows["l2_read_delivered_bytes"]["significant"] is False  # the same 4.362 GB
    miss = rows["l2_read_miss_share"]  # neither run queried the reads' misses: unknown on both sides
    assert pd.isna(miss["a"]) and pd.isna(miss["b"]) and miss["significant"] is None


# --- committed reports ---------------------------------------------------------------------------------------

#: every committed .ncu-rep whose launches hold the fan-out's counters (delivered bytes and L2 read sectors):
#: ncu's full set collects four of the five (not the multicast bytes); whowaits' WhowaitsRoofline all five since
#: fa07923. tests/test_l2_fanout.py::test_the_reports_with_counters_are_the_listed_ones holds the list equal to
#: what is committed: add a report profiled with the new section here (no report with all five is committed yet).
WITH_COUNTERS = (
    "reports/h200/ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ext-sdpa-flash-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1233/v34-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1233/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1241/v34-120ctas/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1321/v34-same-session/b1_h16_s16384_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1321/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1340/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1520/v34-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1520/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v34_q_regs/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v36_warp_epilogue_only/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v36_warp_epilogue_only/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v43_warp_epilogue_whole_heads/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1525/same-session/v43_warp_epilogue_whole_heads/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1636/v34-same-session/b4_h32_s4096_d64_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1640/v34-same-session/b4_h32_s4096_d64_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1938/v34-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T1938/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T2152/v34-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T2152/v36-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T2206/v34-same-session/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/ladder4/2026-12-03T2206/v34-same-session/b4_h32_s4096_d64_fp16.ncu-rep",
    "reports/h200/v25_wide_kv/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v26_kv_multicast/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v38_kv_multicast4/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v38_kv_multicast4/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v39_kv_multicast8/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v39_kv_multicast8/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v40_stream_k/b1_h16_s16384_d128_fp16.ncu-rep",
    "reports/h200/v40_stream_k/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v40_stream_k/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v41_stream_k_tail/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v41_stream_k_tail/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v42_whole_head_rounds/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v42_whole_head_rounds/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v43_warp_epilogue_whole_heads/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v43_warp_epilogue_whole_heads/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v44_d64_idle_rows/b4_h32_s4096_d64_fp16.ncu-rep",
    "reports/h200/v45_d64_idle_rows_only/b4_h32_s4096_d64_fp16.ncu-rep",
    "reports/h200/v46_pv_wait_late/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v46_pv_wait_late/b4_h16_s4096_d128_fp16.ncu-rep",
    "reports/h200/v47_q_split/b1_h64_s1024_d128_fp16.ncu-rep",
    "reports/h200/v47_q_split/b4_h16_s4096_d128_fp16.ncu-rep",
    "tests/public-reports/bbastar/rtx4070-astar-full.ncu-rep",
    "tests/public-reports/cutlass-panjd123/report-s4.ncu-rep",
    "tests/public-reports/cutlass-panjd123/report-s8-persist.ncu-rep",
    "tests/public-reports/cutlass-panjd123/report-s8.ncu-rep",
    "tests/public-reports/indexspaces-eschnett/a40-julia-frb-full.ncu-rep",
    "tests/public-reports/sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep",
    "tests/public-reports/speedy-scan/rtx3070-scan-ncu2020-full.ncu-rep",
)

COMMITTED = sorted(p.relative_to(ROOT).as_posix() for base in ("reports", "tests/public-reports")
                   for p in (ROOT / base).rglob("*.ncu-rep") if p.is_file())


@lru_cache(maxsize=None)
def _launches(rel: str):
    from profiler.report import load_report

    return load_report(ROOT / rel).launches


def _has_counters(rel: str) -> bool:
    return any(la.has(DELIVERED) and la.has(SECTORS) for la in _launches(rel))


@pytest.mark.slow  # ingests every committed report (from the frames cache when warm)
def test_the_reports_with_counters_are_the_listed_ones():
    found = tuple(r for r in COMMITTED if _has_counters(r))
    assert len(COMMITTED) > 50
    assert found == WITH_COUNTERS, "update WITH_COUNTERS: these committed reports hold the L2 read counters"


@pytest.mark.parametrize("rel", WITH_COUNTERS)
def test_committed_fanout_is_ncus_ratio(rel):
    """On every listed report, each launch's fan-out is ncu's delivered bytes over its L2 read sectors x 32, and > 0
    wherever the SMs read from L2 at all; the other fields are ncu's values."""
    for la in _launches(rel):
        q = _quantities(la)
        delivered, sectors = la.value(DELIVERED), la.value(SECTORS)
        if delivered is None or sectors is None:  # a launch ncu could not measure (the H800 report's last)
            assert q["l2_read_fanout"] is None
            continue
        assert q["l2_read_delivered_bytes"] == delivered and q["l2_read_sectors"] == sectors
        assert q["l2_read_miss_sectors"] == la.value(MISS)
        assert q["l2_read_multicast_bytes"] == la.value(MULTICAST)
        if not sectors:  # nothing read from L2 (the H800 report's random-number kernels only write): no ratio
            assert q["l2_read_fanout"] is None and not delivered
            continue
        if not delivered:  # the RTX 4070 (cc 8.9) report: 128 k sectors read, 0 bytes counted into L1TEX: no ratio
            assert q["l2_read_fanout"] is None and rel == "tests/public-reports/bbastar/rtx4070-astar-full.ncu-rep"
            continue
        assert q["l2_read_fanout"] == pytest.approx(delivered / (sectors * SECTOR), rel=1e-12)
        assert q["l2_read_fanout"] > 0
        if la.value(MISS) is not None:
            assert 0 <= q["l2_read_miss_share"] <= 1


def test_cudnn_shares_its_l2_reads():
    """cuDNN's flash attention (b1_h64_s1024, full set): 285 MB delivered for 4.63 M sectors read, fan-out 1.93."""
    (la,) = _launches("reports/h200/ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep")
    q = _quantities(la)
    assert q["l2_read_fanout"] == pytest.approx(1.927, abs=1e-3)
    assert q["l2_read_miss_share"] == pytest.approx(0.430, abs=1e-3)


# The whowaits-set reports of one ncu session (T1233, b4_h16_s4096_d128_fp16): v34 without clusters, v38 and v39 with
# K/V multicast over clusters of 4 and 8 (kernels/v38_kv_multicast4, v39_kv_multicast8).
T1233_B4 = {1: "reports/h200/ladder4/2026-12-03T1233/v34-same-session/b4_h16_s4096_d128_fp16.ncu-rep",
            4: "reports/h200/v38_kv_multicast4/b4_h16_s4096_d128_fp16.ncu-rep",
            8: "reports/h200/v39_kv_multicast8/b4_h16_s4096_d128_fp16.ncu-rep"}


def test_multicast_width_sets_the_fanout():
    """The same bytes reach the SMs whatever the cluster (4.36 GB: 2,048 tiles x 2 MB of K/V + 67 MB of Q), and the
    counters see the multicast: without a cluster no byte comes by multicast and the L2 merges v34's requests on its
    own (fan-out 2.37); with clusters of w each K/V sector is read once for w SMs, so fan-out ~w (Q's 1.5% of the
    bytes, not multicast, keeps it below w: 3.66 and 6.66, ncu's values) and the multicast share is the K/V's 98.5%."""
    q = {w: _quantities(_launches(rel)[0]) for w, rel in T1233_B4.items()}
    delivered = {w: x["l2_read_delivered_bytes"] for w, x in q.items()}
    assert max(delivered.values()) / min(delivered.values()) < 1.001
    assert q[1]["l2_read_multicast_share"] == 0
    assert 2.0 < q[1]["l2_read_fanout"] < 3.0
    for w in (4, 8):
        assert q[w]["l2_read_multicast_share"] == pytest.approx(0.985, abs=0.005)
        assert 0.8 * w < q[w]["l2_read_fanout"] < w
    assert q[1]["l2_read_fanout"] < q[4]["l2_read_fanout"] < q[8]["l2_read_fanout"]


def _without_l2(summary: dict) -> dict:
    return {**summary, "missing": [m for m in summary["missing"] if not m["field"].startswith("roofline.l2_reads.")]}


def _check_show(rel: str, capsys) -> None:
    from profiler.analyze import summarize
    from profiler.check.fields import missing as gate_missing
    from profiler.cli.show import render_tables
    from profiler.compare.gaps import gap_line

    summaries = summarize(ROOT / rel)
    render_tables(summaries, top=3, verbose=True)
    out = capsys.readouterr().out
    for s in summaries:
        l2 = s["roofline"]["l2_reads"]
        # the note and the gate read as they did before the fan-out was added
        assert gap_line("x", s, verbose=True) == gap_line("x", _without_l2(s), verbose=True)
        assert gate_missing(s) == gate_missing(_without_l2(s))
        if rel in WITH_COUNTERS:
            continue
        assert all(v is None for v in l2.values()), rel
        named = {m["field"] for m in s["missing"] if m["field"].startswith("roofline.l2_reads.")}
        assert len(named) == 5 and all("not collected" in m.get("reason", "") for m in s["missing"]
                                       if m["field"] in named)
    if rel not in WITH_COUNTERS:
        assert "L2 reads for the SMs" not in out
        assert out.count("L2 read fan-out: not collected") == len(summaries)


@pytest.mark.parametrize("rel", ["reports/h200/v09_wgmma/b1_h64_s1024_d128_fp16.ncu-rep",
                                 "tests/public-reports/esmm-research/a10g-sgemm-default-set.ncu-rep"])
def test_show_without_the_counters_says_not_collected(rel, capsys):
    if not (ROOT / rel).is_file():
        pytest.skip(f"{rel} not committed")
    _check_show(rel, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("rel", COMMITTED)
def test_every_committed_report_shows_as_before(rel, capsys):
    _check_show(rel, capsys)


def test_migration_carries_the_fanout(tmp_path):
    """`whowaits migration` over v34, v38 and v39 at b4 (T1233): the JSON table has each version's fan-out and
    multicast share (ncu's ratio, rising with the cluster width), the console prints them on one line below the
    table, and the HTML report has the column."""
    try:
        from test_compare_helpers import run
    except ImportError:  # tests/ imported as a package
        from tests.test_compare_helpers import run

    paths = [T1233_B4[w] for w in (1, 4, 8)]
    proc = run("migration", *paths, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["table"]
    fan = [r["l2_read_fanout"] for r in rows]
    assert fan == sorted(fan) and fan[0] == pytest.approx(_quantities(_launches(paths[0])[0])["l2_read_fanout"])
    assert [r["l2_read_multicast_share"] > 0.9 for r in rows] == [False, True, True]
    text = run("migration", *paths, env={"COLUMNS": "150"}).stdout
    line = next(ln for ln in text.replace("\n", " ").split("L2 read fan-out")[1:2])
    assert f"{fan[0]:.2f}×" in line and f"{fan[2]:.2f}× (98% by multicast)" in line
    out = tmp_path / "m.html"
    html = run("migration", *paths, "--html", str(out))
    assert html.returncode == 0, html.stderr[-500:]
    assert "L2 read fan-out (SMs per read)" in out.read_text() and "98% by multicast" in out.read_text()
