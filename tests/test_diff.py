"""`whowaits diff` on the two committed starter reports: FA2 via mma.sync (torch SDPA flash) against
cuDNN's wgmma kernel. Numbers are checked against the summaries of the same reports, so the diff
must carry exactly the samples ncu recorded."""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest

try:
    from test_compare_helpers import CUDNN, FLASH, SHAPE, assert_user_error, run
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import CUDNN, FLASH, SHAPE, assert_user_error, run

from profiler.analyze import summarize
from profiler.compare import diff


@pytest.fixture(scope="module")
def summaries():
    return summarize(str(FLASH))[0], summarize(str(CUDNN))[0]


@pytest.fixture(scope="module")
def diff_json():
    proc = run("diff", "ext-sdpa-flash", "ext-sdpa-cudnn", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_diff_carries_the_reports_samples(diff_json, summaries):
    d, _ = diff_json
    a, b = summaries
    got_a = {r["reason"]: r["samples_a"] for r in d["stalls"]}
    got_b = {r["reason"]: r["samples_b"] for r in d["stalls"]}
    assert {k: v for k, v in got_a.items() if v} == {k: v for k, v in a["stall_samples"].items() if v}
    assert {k: v for k, v in got_b.items() if v} == {k: v for k, v in b["stall_samples"].items() if v}
    for side in ("a", "b"):
        assert sum(r[f"share_{side}"] for r in d["stalls"]) == pytest.approx(1.0)
    for r in d["stalls"]:
        assert r["delta"] == pytest.approx(r["share_b"] - r["share_a"])
        assert r["lo_a"] <= r["share_a"] <= r["hi_a"] and r["lo_b"] <= r["share_b"] <= r["hi_b"]
        assert r["delta_lo"] <= r["delta"] <= r["delta_hi"]
        assert r["significant"] == (r["delta_lo"] > 0 or r["delta_hi"] < 0)
    # opcode classes: the same samples as the summaries' opcode_waits
    cls_a = {r["class"]: r["samples"] for r in a["opcode_waits"]}
    assert {r["class"]: r["samples_a"] for r in d["classes"] if r["samples_a"]} == {k: v for k, v in cls_a.items() if v}


def test_diff_sees_mma_sync_versus_wgmma(diff_json, summaries):
    d, _ = diff_json
    a, b = summaries
    dur = {r["metric"]: r for r in d["metrics"]}["duration_ns"]
    assert dur["a"] == a["duration_ns"] and dur["b"] == b["duration_ns"]
    assert d["speedup"] == pytest.approx(a["duration_ns"] / b["duration_ns"])
    assert d["speedup"] > 1.3 and dur["significant"] is True  # cuDNN's kernel is much faster on this shape
    classes = {r["class"]: r for r in d["classes"]}
    # flash waits on HMMA (mma.sync) and never issues wgmma; cuDNN is the other way round
    assert classes["HMMA"]["samples_a"] > 0 and classes["HMMA"]["samples_b"] == 0
    assert classes["HGMMA"]["samples_a"] == 0 and classes["HGMMA"]["samples_b"] > 0
    assert classes["HMMA"]["significant"] and classes["HGMMA"]["significant"]
    assert d["top_a"]["class"] == "HMMA"
    assert d["top_b"]["class"] in ("WARPGROUP", "HGMMA")
    v = d["verdict"]
    assert v.startswith(f"ext-sdpa-cudnn is {d['speedup']:.2g}x faster than ext-sdpa-flash")
    assert f"from {d['top_a']['class']}·{d['top_a']['reason']}" in v
    assert f"to {d['top_b']['class']}·{d['top_b']['reason']}" in v
    assert {r["kind"] for r in d["barriers"]} == {"static", "executed"}
    static = {r["opcode"]: r for r in d["barriers"] if r["kind"] == "static"}
    assert static and all(r["significant"] == (r["a"] != r["b"]) for r in static.values())
    assert {k: r["b"] for k, r in static.items() if r["b"]} == b["barriers"]["static"] or \
        {k: r["b"] for k, r in static.items() if r["b"]} == {k: v for k, v in b["barriers"]["static"].items() if v}
    metrics = {r["metric"]: r for r in d["metrics"]}
    assert metrics["tensor_path"]["a"] == "hmma" and metrics["tensor_path"]["significant"] is True


def test_diff_carries_the_xu_pipe(diff_json, summaries):
    # neither whowaits-set starter report holds ncu's XU counter: its row is null on both sides, the SASS-derived
    # figure carries the change (flash's mma.sync kernel 18.6% -> cuDNN's wgmma kernel 34.4% of the XU peak)
    d, _ = diff_json
    rows = {r["metric"]: r for r in d["metrics"]}
    assert rows["xu_pipe_pct"]["a"] is None and rows["xu_pipe_pct"]["b"] is None
    sass = rows["xu_pipe_pct_sass"]
    assert (sass["a"], sass["b"]) == (summaries[0]["xu_pipe_pct_sass"], summaries[1]["xu_pipe_pct_sass"])
    assert (round(sass["a"], 1), round(sass["b"], 1)) == (18.6, 34.4)
    assert sass["ratio"] == pytest.approx(sass["b"] / sass["a"]) and sass["significant"] is True


def test_diff_of_a_version_with_itself_is_all_noise(summaries):
    a, _ = summaries
    d = diff(a, a, "x", "x")
    assert not d.stalls["significant"].any() and not d.waits["significant"].any()
    assert (d.stalls["delta"].abs() < 1e-12).all()
    assert "runs as fast as x within noise" in d.verdict and "top waiter stays" in d.verdict


def test_diff_table_and_csv(summaries):
    proc = run("diff", "ext-sdpa-flash", "ext-sdpa-cudnn")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("Stall reasons", "Who waits: opcode class", "Short scoreboard", "Verdict:", "significant",
                   "duration_ns", "tensor_pipe_pct", "xu_pipe_pct_sass"):
        assert needle in out, needle
    proc = run("diff", str(FLASH), str(CUDNN), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(io.StringIO(proc.stdout))
    assert {"metrics", "stalls", "classes", "waits", "ssc"} <= set(df["table"])
    stalls = df[df["table"] == "stalls"]
    assert stalls["samples_a"].sum() == sum(summaries[0]["stall_samples"].values())


def test_diff_kernel_filter(summaries):
    proc = run("diff", "ext-sdpa-flash", "ext-sdpa-cudnn", "--kernel", "flash_fwd", "--kernel", "cudnn",
               "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["speedup"] > 1


def test_diff_bad_input():
    assert_user_error(run("diff", "v99_nope", "ext-sdpa-cudnn"), "unknown version 'v99_nope'", "ext-sdpa-flash")
    assert_user_error(run("diff", "ext-sdpa-flash", "ext-sdpa-cudnn", "--shape", "b9_h1_s1_d1_fp16"),
                      "no report for version", "b9_h1_s1_d1_fp16")
    assert_user_error(run("diff", "ext-sdpa-flash", "ext-sdpa-cudnn", "--kernel", "no_such_kernel_xyz"),
                      "no_such_kernel_xyz")
    assert_user_error(run("diff", "missing/report.ncu-rep", "ext-sdpa-cudnn"), "no such report")
    assert_user_error(run("diff", "a", "b", "--kernel", "x", "--kernel", "y", "--kernel", "z"), "unknown version")


def test_confound_guard_warns(tmp_path):
    from profiler.provenance import make_sidecar, write_json_atomic

    for name, ncu, clocks in (("v01_a", "2025.3.1.0", "none"), ("v02_b", "2024.1.0.0", "base")):
        (tmp_path / name).mkdir()
        shutil.copy(FLASH, tmp_path / name / f"{SHAPE}.ncu-rep")
        write_json_atomic(tmp_path / name / f"{SHAPE}.json",
                          make_sidecar(version=name, shape=SHAPE, ncu_version=ncu, clock_control=clocks,
                                       gpu="NVIDIA H200", section_set="full"))
    proc = run("diff", "v01_a", "v02_b", "--reports", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    fields = {w["field"] for w in d["warnings"]}
    assert fields == {"ncu_version", "clock_control"}
    assert "reports differ in ncu version" in proc.stderr and "clock control" in proc.stderr
    table = run("diff", "v01_a", "v02_b", "--reports", tmp_path)
    assert "confound" in table.stdout and "differ in ncu version" in table.stdout
    # same report under two shape names, no sidecar: the shape differs and provenance is unchecked
    other = tmp_path / "b1_h64_s2048_d128_fp16.ncu-rep"
    shutil.copy(FLASH, other)
    proc = run("diff", FLASH, other, "--format", "json")
    fields = {w["field"] for w in json.loads(proc.stdout)["warnings"]}
    assert {"shape", "provenance"} <= fields
    # a version without a report at all
    (tmp_path / "v03_empty").mkdir()
    assert_user_error(run("diff", "v01_a", "v03_empty", "--reports", tmp_path), "v03_empty", "has no report")
