"""Timelines (PM sampling): ingestion equals ncu_report's own instance values; phases; `whowaits timeline`.

Fixtures: the `--set full` starter reports (ncu's stock PmSampling section: ~225 PM samples per metric,
126 (flash) and 144 (cuDNN) after ncu_report aligns them to the workload), and a ladder report.
"""

from __future__ import annotations

import csv
import io
import json
import sys

import numpy as np
import pytest

from conftest import ROOT, STARTER_REPORTS
from profiler import metrics as M
from profiler.analyze.timeline import PHASES, normalised, timeline, timelines

FLASH = STARTER_REPORTS["ext-sdpa-flash-fullset_b1_h64_s1024_d128_fp16"]
CUDNN = STARTER_REPORTS["ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16"]
NO_PM = ROOT / "tests/public-reports/esmm-research/a10g-sgemm-default-set.ncu-rep"  # ncu's default set: no PM


def _ncu_action(path):
    import ncu_report  # the test reads the report with ncu_report itself, beside the ingester

    return ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)


@pytest.mark.parametrize("path", [FLASH, CUDNN], ids=["flash", "cudnn"])
def test_timeline_frame_equals_ncu_report_aligned_instances(path, starter_report_for):
    """Every PM metric: times and values are exactly ncu_report's aligned instance values, and those
    are one contiguous run of the metric's own (unaligned) instance values."""
    la = starter_report_for(path).launches[0]
    action = _ncu_action(path)
    tl = action.timelines()
    names = [n for n in action.metric_names() if M.is_pm_metric(n)]
    assert len(names) == 32 and set(la.timeline["metric"].unique()) == set(names)
    for name in names:
        m = action.metric_by_name(name)
        al = tl.aligned_metric(m)
        n = al.num_instances()
        corr = al.correlation_ids()
        want_t = [corr.as_uint64(i) for i in range(n)]
        want_v = [al.as_double(i) for i in range(n)]
        got = la.timeline[la.timeline["metric"] == name]
        assert got["t_ns"].tolist() == want_t, name
        assert got["value"].tolist() == want_v, name
        raw = [m.as_double(i) for i in range(m.num_instances())]
        assert m.num_instances() > n
        starts = [k for k in range(len(raw) - n + 1) if raw[k:k + n] == want_v]
        assert starts, f"{name}: aligned values are not a run of the raw instances"


@pytest.fixture(scope="module")
def starter_report_for():
    from profiler.report import load_report

    cache = {}

    def get(path):
        if path not in cache:
            cache[path] = load_report(path)
        return cache[path]

    return get


@pytest.mark.parametrize("path", [FLASH, CUDNN], ids=["flash", "cudnn"])
def test_series_are_the_samples_of_the_kernel_window(path, starter_report_for):
    la = starter_report_for(path).launches[0]
    t = timeline(la)
    assert t["missing"] == [{"field": "series.warps_<reason>", "section": "WhowaitsPmWarpStates"}]
    tensor = la.timeline[la.timeline["metric"] == t["sources"]["tensor_pct"]]["value"].tolist()
    # the window's samples are a run of the aligned samples, unchanged
    n = len(t["t_ns"])
    k = next(k for k in range(len(tensor)) if tensor[k:k + n] == t["series"]["tensor_pct"])
    assert tensor[:k] == [0.0] * k or k <= 3
    # SMs active in every sample of the window, idle right after it
    active = la.timeline[la.timeline["metric"] == t["sources"]["sm_active_cycles"]]["value"].to_numpy()
    assert (active[k:k + n] > 0).all() and active[k + n] == 0
    # the window spans the kernel: ncu's own duration (another pass) within one PM interval
    assert abs(t["duration_ns"] - la.value("gpu__time_duration.sum")) <= t["interval_ns"]
    assert t["interval_ns"] == 1504.0


@pytest.mark.parametrize("path", [FLASH, CUDNN], ids=["flash", "cudnn"])
def test_phases_tile_the_window(path, starter_report_for):
    t = timeline(starter_report_for(path).launches[0])
    ph = t["phases"]
    assert [p["name"] for p in ph] == list(PHASES)
    assert ph[0]["start_ns"] == 0 and ph[-1]["end_ns"] == t["duration_ns"]
    assert ph[0]["end_ns"] == ph[1]["start_ns"] and ph[1]["end_ns"] == ph[2]["start_ns"]
    assert sum(p["share"] for p in ph) == pytest.approx(1.0)
    assert sum(p["samples"] for p in ph) == len(t["t_ns"])
    assert t["tail_share"] == ph[2]["share"] and t["ramp_share"] == ph[0]["share"]
    steady = slice(ph[0]["samples"], ph[0]["samples"] + ph[1]["samples"])
    assert t["steady_tensor_pct"] == pytest.approx(np.mean(t["series"]["tensor_pct"][steady]))
    assert t["activity"] == "tensor_pct"


def test_persistent_cudnn_has_a_shorter_tail_than_flash(starter_report_for):
    """cuDNN's kernel is persistent (128 CTAs launched once, in the first sample); FlashAttention-2
    launches 256 CTAs, then a second wave (128 + 96 + 32 half-way through): its last wave leaves a
    longer tail. Hand check of the series: flash's tensor pipe sits at 44-27% over its last 5
    samples, cuDNN's drops in its last 2."""
    f = timeline(starter_report_for(FLASH).launches[0])
    c = timeline(starter_report_for(CUDNN).launches[0])
    assert sum(v > 0 for v in c["series"]["ctas_launched"]) == 1
    assert sorted(v for v in f["series"]["ctas_launched"] if v > 0) == [32, 96, 128, 256]
    assert c["tail_share"] < f["tail_share"]
    assert (f["phases"][2]["samples"], c["phases"][2]["samples"]) == (6, 2)
    assert c["steady_tensor_pct"] > f["steady_tensor_pct"]


def test_report_without_pm_sampling_is_null_with_the_section_named():
    tls = timelines(NO_PM)
    assert len(tls) == 4
    for t in tls:
        for key in ("t_ns", "series", "phases", "steady_tensor_pct", "tail_share"):
            assert t[key] is None
        assert {m["section"] for m in t["missing"]} == {"WhowaitsPmSampling"}
        assert {m["field"] for m in t["missing"]} >= {"t_ns", "series", "phases", "steady_tensor_pct", "tail_share"}
        assert normalised(t).empty


def test_normalised_bins(starter_report_for):
    t = timeline(starter_report_for(CUDNN).launches[0])
    n = normalised(t, points=20)
    assert len(n) == 20 and n["x"].iloc[-1] == 1.0 and not n.isna().any().any()
    assert n["tensor_pct"].max() <= max(t["series"]["tensor_pct"])


# --- the command ----------------------------------------------------------------------------------


def run_cli(monkeypatch, capsys, *args):
    from profiler.cli import main

    monkeypatch.setattr(sys, "argv", ["whowaits", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("WHOWAITS_NO_SUPERVISOR", "1")  # in this process, so that capsys sees the output
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_json_is_the_contract(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "timeline", CUDNN, "--format", "json")
    assert code == 0, err
    (t,) = json.loads(out)
    for key in ("t_ns", "series", "phases", "steady_tensor_pct", "tail_share", "missing"):
        assert key in t
    assert len(t["series"]["tensor_pct"]) == len(t["t_ns"])
    assert {p["name"] for p in t["phases"]} == set(PHASES)


def test_cli_csv_and_table(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", FLASH, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {"summary", "phase", "sample"} <= {r["record"] for r in rows} <= {"summary", "phase", "sample", "dip"}
    assert sum(r["record"] == "phase" for r in rows) == 3
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", FLASH)
    assert code == 0 and "steady-state tensor activity" in out and "tail" in out
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", NO_PM)
    assert code == 0 and "no PM sampling" in out and "WhowaitsPmSampling" in out


def test_cli_bad_input_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    for args in ((tmp_path / "none.ncu-rep",), (FLASH, "--kernel", "nomatch_xyz"), (FLASH, "--kernel", "(")):
        code, out, err = run_cli(monkeypatch, capsys, "timeline", *args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
        assert err.startswith("whowaits: error: ") and "Traceback" not in err


# --- compared across versions ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def fullset_diff():
    from profiler.analyze import summarize
    from profiler.compare.diff import diff

    a, b = summarize(FLASH)[0], summarize(CUDNN)[0]
    return a, b, diff(a, b, "flash", "cudnn")


def test_diff_compares_phases_with_the_pm_resolution(fullset_diff):
    a, b, d = fullset_diff
    assert list(d.phases["phase"]) == [*PHASES, "dips"]
    tail = d.phases.set_index("phase").loc["tail"]
    assert tail["share_a"] == pytest.approx(a["timeline"]["tail_share"])
    assert tail["share_b"] == pytest.approx(b["timeline"]["tail_share"])
    # hand check: 8.1% -> 4.9% is 3.2 pp, under two 1.504 us samples of cuDNN's 61.5 us window (4.9 pp)
    assert tail["delta"] == pytest.approx(-0.0321, abs=5e-4) and not tail["significant"]
    assert "tail" not in d.verdict.split("of samples")[-1]


def test_diff_compares_regions_and_says_which_moved(fullset_diff):
    a, b, d = fullset_diff
    r = d.regions.set_index("region")
    assert r["samples_a"].sum() == sum(x["samples"] for x in a["regions"])
    # cuDNN has no load_kv instruction: that row is flash's alone
    assert set(r["source_a"]) == {"inferred"} and set(r["source_b"].dropna()) == {"inferred"}
    assert r.loc["load_kv", "samples_b"] == 0
    # the biggest significant move outside `other`: cuDNN's mbarrier / wgmma waits land in `sync`
    moved = r.drop(index="other")
    top = moved.loc[moved["delta"].abs().idxmax()]
    assert top.name == "sync" and bool(top["significant"])
    assert f"cudnn: sync {100 * top['share_a']:.0f}% → {100 * top['share_b']:.0f}% of samples" in d.verdict


def test_migration_carries_timelines_regions_and_phases():
    from profiler.compare import migrate

    m = migrate(["ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset"])
    assert set(m.timelines["version"]) == {"ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset"}
    assert set(m.timelines["series"]) == {"tensor_pct", "issue_pct"}
    assert m.table["tail_share"].notna().all() and m.table["steady_tensor_pct"].gt(50).all()
    per = m.regions.groupby("version")["share"].sum()
    assert np.allclose(per.to_numpy(), 1.0)
    step = m.steps["sentence"].iloc[0]
    assert "of samples" in step


def test_merged_launches_keep_regions_by_name_and_source(fullset_diff):
    from profiler.compare.merge import merge_launches

    a, _, _ = fullset_diff
    m = merge_launches([a, a])
    assert [(r["name"], r["source"]) for r in m["regions"]] == [(r["name"], r["source"]) for r in a["regions"]]
    assert sum(r["samples"] for r in m["regions"]) == 2 * sum(r["samples"] for r in a["regions"])
    assert m["timeline"] is None


# --- the committed data set -------------------------------------------------------------------------

LADDER_REPORTS = sorted((ROOT / "reports/h200").glob("v*/b1_h64_s1024_d128_fp16.ncu-rep"))
EXT_REPORTS = [ROOT / f"reports/h200/{s}/b1_h64_s1024_d128_fp16.ncu-rep" for s in ("ext-sdpa-flash", "ext-sdpa-cudnn")]


@pytest.mark.parametrize("path", LADDER_REPORTS + EXT_REPORTS, ids=lambda p: p.parent.name)
def test_committed_reports_show_timelines_and_their_regions(path):
    """The committed data set: every committed whowaits-set report holds PM samples (the window spans ncu's own
    duration within one sample), ladder rungs carry their marked sources (declared regions), SDPA's kernels
    get inferred ones."""
    from profiler.analyze import summarize_launch
    from profiler.report import load_report

    la = load_report(path).launches[0]
    t = timeline(la)
    assert t["t_ns"] is not None, t["missing"]
    assert abs(t["duration_ns"] - la.value("gpu__time_duration.sum")) <= 2 * t["interval_ns"]
    regs = summarize_launch(la)["regions"]
    want = "declared" if path in LADDER_REPORTS else "inferred"
    assert {r["source"] for r in regs} == {want}
