"""`whowaits migration` over the committed reports (every version, ladder order, ext subjects last)."""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest

try:
    from test_compare_helpers import CUDNN, FLASH, REPORTS, SHAPE, assert_user_error, run
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import CUDNN, FLASH, REPORTS, SHAPE, assert_user_error, run

from profiler.analyze import summarize
from profiler.compare import known_versions
from profiler.provenance import read_sidecar


@pytest.fixture(scope="module")
def mig():
    proc = run("migration", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_default_is_every_version_with_a_report_in_ladder_order(mig):
    # every version with a report, less those taken with another section set (the --set full
    # starter reports beside the whowaits-set ones), which a note names
    # (a rung profiled at other shapes only, like v25 at b4_h16_s4096 alone, is left out with a note that says so)
    have = [v for v in known_versions(REPORTS) if (REPORTS / v / f"{SHAPE}.ncu-rep").is_file()]
    sets = {v: (read_sidecar(REPORTS / v / f"{SHAPE}.ncu-rep") or {}).get("section_set") for v in have}
    versions = [v for v, s in sets.items() if s == "whowaits"]
    assert mig["versions"] == versions
    for v in (v for v, s in sets.items() if s != "whowaits"):
        assert any(n.startswith(f"left out {v}: section set '{sets[v]}'") for n in mig["notes"])
    for v in sorted(set(known_versions(REPORTS)) - set(have)):
        assert f"left out {v}: no report at shape {SHAPE}" in mig["notes"]
    assert {"ext-sdpa-flash", "ext-sdpa-cudnn"} <= set(versions)
    ext = [i for i, v in enumerate(versions) if v.startswith("ext-")]
    assert ext == list(range(len(versions) - len(ext), len(versions)))  # ext subjects after the ladder
    ladder = [v for v in versions if not v.startswith("ext-")]
    assert ladder == sorted(ladder)  # vNN order
    assert [r["version"] for r in mig["table"]] == versions
    assert len(mig["steps"]) == len(versions) - 1
    assert len(mig["roofline"]) == 4 * len(versions)  # L1, L2, DRAM, shared memory


def test_roofline_trajectory_has_the_shared_memory_level(mig):
    smem = {r["version"]: r["intensity"] for r in mig["roofline"] if r["level"] == "smem"}
    assert list(smem) == mig["versions"]
    for v, inten in smem.items():  # v01 keeps nothing in shared memory: no point, not a 0
        assert (inten is None) == (v == "v01_naive"), v
    assert {r["level"] for r in mig["roofs"]} >= {"smem"}
    rows = {r["version"]: r for r in mig["table"]}
    assert rows["v07_tuned"]["intensity_smem"] == pytest.approx(smem["v07_tuned"])


def test_rows_match_the_reports(mig):
    rows = {r["version"]: r for r in mig["table"]}
    for label, path in (("ext-sdpa-flash", FLASH), ("ext-sdpa-cudnn", CUDNN)):
        s = summarize(str(path))[0]
        r = rows[label]
        assert r["duration_ns"] == s["duration_ns"]
        assert r["tflops_counted"] == pytest.approx(s["roofline"]["achieved_tflops"])
        assert r["tflops"] == pytest.approx(4 * 1 * 64 * 1024**2 * 128 / s["duration_ns"] / 1e3)
        n = sum(s["stall_samples"].values())
        top = max((w for w in s["who_waits"] if w["reason"] not in ("selected", "not_selected")),
                  key=lambda w: w["samples"])
        assert (r["top_class"], r["top_reason"]) == (top["class"], top["reason"])
        assert r["top_share"] == pytest.approx(top["samples"] / n)
        assert r["top_lo"] < r["top_share"] < r["top_hi"]
        shares = [x for x in mig["stall_shares"] if x["version"] == label]
        assert sum(x["share"] for x in shares) == pytest.approx(1.0)
        assert {x["reason"]: x["samples"] for x in shares if x["samples"]} == \
               {k: v for k, v in s["stall_samples"].items() if v}


def test_xu_pipe_per_version(mig):
    # the seed shape (b1_h64_s1024_d128): rungs profiled before the XU counter was collected have the SASS-derived
    # figure only; v20 on have ncu's counter too, and the two agree; at head dim 128 the tensor pipe stays busier
    rows = {r["version"]: r for r in mig["table"]}
    assert rows["v19_lazy_rescale"]["xu_pipe_pct"] is None
    assert round(rows["v19_lazy_rescale"]["xu_pipe_pct_sass"], 1) == 34.1
    v20 = rows["v20_three_consumers"]
    assert round(v20["xu_pipe_pct"], 1) == 34.7 and v20["xu_pipe_pct_sass"] == pytest.approx(v20["xu_pipe_pct"], abs=1e-6)
    assert all(r["xu_pipe_pct_sass"] is not None for r in mig["table"])
    assert all(r["xu_pipe_pct_sass"] < r["tensor_pipe_pct"] for r in mig["table"] if r["tensor_pipe_pct"] > 1)


def test_xu_pipe_passes_the_tensor_pipe_at_head_dim_64():
    proc = run("migration", "v20_three_consumers", "v22_d64_stages4", "--shape", "b4_h32_s4096_d64_fp16",
               "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))["table"]
    assert [(round(r["xu_pipe_pct"], 1), round(r["tensor_pipe_pct"], 1)) for r in rows] == [(57.7, 55.8), (57.5, 55.7)]
    proc = run("migration", *(str(REPORTS / v / f"{shape}.ncu-rep") for v, shape in (
        ("v19_lazy_rescale", SHAPE), ("v20_three_consumers", SHAPE), ("v20_three_consumers", "b4_h32_s4096_d64_fp16"))),
        env={"COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert any("tensor · XU pipe" in ln and ln.startswith("┃") for ln in proc.stdout.splitlines())  # the header
    # v19: the SASS-derived figure, marked; v20 at d128 ncu's counter below the tensor pipe's, at d64 above it
    assert "65.5% · 34.1%*" in proc.stdout and "* from the SASS" in proc.stdout
    assert "66.9% · 34.7% " in proc.stdout and "55.8% · 57.7%" in proc.stdout


def test_steps_say_what_moved(mig):
    table = mig["table"]
    rows = {r["version"]: r for r in table}
    ladder = [r["version"] for r in table if not r["version"].startswith("ext-")]
    for step, dst in zip(mig["steps"], table[1:]):
        # a rung of ours follows its predecessor; an external subject is set beside the top rung (not chained)
        external = dst["version"].startswith("ext-")
        src = rows[ladder[-1]] if external and ladder else table[table.index(dst) - 1]
        assert step["src"] == src["version"] and step["dst"] == dst["version"] and dst["vs"] == src["version"]
        assert step["beside"] == (external and bool(ladder))
        assert step["speedup"] == pytest.approx(src["duration_ns"] / dst["duration_ns"])
        assert step["sentence"].startswith(dst["version"])
        assert (f"from {step['top_src']}" in step["sentence"]) == step["moved"]
        assert dst["step"] == step["sentence"]

    # a region one side lacks is named by that side's region source, never "nan" (cuDNN's inferred regions
    # have no load_kv: "load_kv 7% → 0% of samples (regions declared → inferred)")
    assert not any("nan" in s["sentence"] for s in mig["steps"])
    cudnn = next(s for s in mig["steps"] if s["dst"] == "ext-sdpa-cudnn")
    assert "(regions declared → inferred)" in cudnn["sentence"] or "regions" not in cudnn["sentence"]


@pytest.mark.parametrize("columns", [150, 300])
def test_table_keeps_one_block_per_version(columns, mig):
    """A version's change is a paragraph: as a column it used to wrap every row into ~20 lines (664 lines at
    150 columns). Narrower than 240 columns the table has no change column and each step names its change
    in full below; wider, the change is one line cut with an ellipsis."""
    proc = run("migration", env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("Path of the top waiter")[0]
    header = "\n".join(table.splitlines()[:6])
    changes = [r["change"] for r in mig["table"] if isinstance(r.get("change"), str) and r["change"]]
    assert changes
    if columns < 240:
        assert "change" not in header
        assert proc.stdout.count("     change: ") == len([s for s in mig["steps"] if not s["beside"]
                                                          and next(r for r in mig["table"]
                                                                   if r["version"] == s["dst"]).get("change")])
    else:
        assert "change" in header and "change: " not in proc.stdout
        assert any(c[:40] in table for c in changes)
    # at most 6 lines per version in the migration table itself (top waiter and role edge may wrap; the change
    # never does); the regions and phases tables below it have one line per version
    body = [ln for ln in table.split("└")[0].splitlines() if ln.startswith("│")]
    assert len(body) <= 6 * len(mig["table"]), len(body)


def test_explicit_order_single_version_and_csv():
    proc = run("migration", "ext-sdpa-cudnn", "ext-sdpa-flash", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    assert m["versions"] == ["ext-sdpa-cudnn", "ext-sdpa-flash"]
    assert "slower" in m["steps"][0]["sentence"]
    one = json.loads(run("migration", "ext-sdpa-flash", "--format", "json").stdout)
    assert one["versions"] == ["ext-sdpa-flash"] and one["steps"] == [] and one["warnings"] == []
    proc = run("migration", "ext-sdpa-flash", "ext-sdpa-cudnn", "--format", "csv")
    df = pd.read_csv(io.StringIO(proc.stdout))
    assert list(df["version"]) == ["ext-sdpa-flash", "ext-sdpa-cudnn"] and "top_class" in df.columns


def test_table_and_html(tmp_path):
    out = tmp_path / "ladder.html"
    proc = run("migration", "--html", out)
    assert proc.returncode == 0, proc.stderr
    assert "Bottleneck migration" in proc.stdout and "Path of the top waiter" in proc.stdout
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "ext-sdpa-cudnn" in text
    # both tensor scales in the ladder table: the path's own peak and the GPU's dense tensor roof
    assert "tensor pipe (own peak)" in text and "tensor roof (dense)" in text
    assert "tensor roof" in proc.stdout
    before = out.stat().st_mtime_ns
    assert_user_error(run("migration", "--html", out), "exists", "--force")
    assert out.stat().st_mtime_ns == before
    # --force replaces the page: two versions only (the whole ladder's page is drawn once above; drawing it
    # again cost ~4 s of plotly on the 2-core machine), so the page written is told apart from the first one
    forced = run("migration", "ext-sdpa-flash", "ext-sdpa-cudnn", "--html", out, "--force")
    assert forced.returncode == 0, forced.stderr
    again = out.read_text()
    assert again.startswith("<!DOCTYPE html>") and "ext-sdpa-cudnn" in again and "v01_naive" in text
    assert "v01_naive" not in again and again != text
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_migration_bad_input(tmp_path):
    assert_user_error(run("migration", "ext-sdpa-flash", "v77_unknown"), "unknown version 'v77_unknown'",
                      "ext-sdpa-cudnn")
    assert_user_error(run("migration", "--kernel", "matches_nothing_zz"), "matches_nothing_zz")
    assert_user_error(run("migration", "--reports", tmp_path / "none"), "no reports found")
    (tmp_path / "v01_x").mkdir()
    shutil.copy(FLASH, tmp_path / "v01_x" / "b2_h8_s512_d64_fp16.ncu-rep")
    (tmp_path / "v02_y").mkdir()
    shutil.copy(CUDNN, tmp_path / "v02_y" / f"{SHAPE}.ncu-rep")
    assert_user_error(run("migration", "v01_x", "v02_y", "--reports", tmp_path), "share no shape")
    assert_user_error(run("migration", "v01_x", "v02_y", "--reports", tmp_path, "--shape", SHAPE),
                      "no report for version 'v01_x'")
    # default: the shape most versions have; here a tie, broken by name
    proc = run("migration", "--reports", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["versions"] == ["v02_y"]


def test_ladder_order_and_metadata_come_from_sidecars(tmp_path):
    """Ladder order, titles, hypotheses and the problem's TFLOPS come from the sidecars (written at profile
    time), never from kernels/: folder names do not decide the order, and ext subjects come last. A report
    without a sidecar still works, without title or problem TFLOPS."""
    from profiler.provenance import make_sidecar, write_json_atomic

    # deliberately created out of name order; contents are committed reports (the test is about order)
    sides = {"zz_first": dict(ladder_order=1, title="First rung", problem_flops=3.4359738368e10,
                              expected_bottleneck="FP16 on LDG"),
             "aa_second": dict(ladder_order=2, title="Second rung", problem_flops=3.4359738368e10),
             "ext-zzz": dict(title="an external subject", problem_flops=3.4359738368e10),
             "ext-aaa": None}
    for name, src in [("aa_second", CUDNN), ("ext-zzz", FLASH), ("zz_first", FLASH), ("ext-aaa", CUDNN)]:
        (tmp_path / name).mkdir()
        shutil.copy(src, tmp_path / name / f"{SHAPE}.ncu-rep")
        if sides[name] is not None:
            write_json_atomic(tmp_path / name / f"{SHAPE}.json",
                              make_sidecar(version=name, shape=SHAPE, section_set="whowaits", **sides[name]))
    proc = run("migration", "--reports", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    assert m["versions"] == ["zz_first", "aa_second", "ext-aaa", "ext-zzz"]
    rows = {r["version"]: r for r in m["table"]}
    assert rows["zz_first"]["title"] == "First rung"
    assert rows["zz_first"]["expected_bottleneck"] == "FP16 on LDG"
    assert rows["ext-zzz"]["title"] == "an external subject"
    assert rows["ext-aaa"]["title"] == "" and rows["ext-aaa"]["tflops"] is None  # no sidecar
    # TFLOPS = the sidecar's problem FLOPs / the measured duration (not the counters' FLOPs)
    dur = rows["zz_first"]["duration_ns"]
    assert rows["zz_first"]["tflops"] == pytest.approx(3.4359738368e10 / dur / 1e3, rel=1e-12)
    # a folder without reports is named as such
    (tmp_path / "v09_empty").mkdir()
    assert_user_error(run("diff", "zz_first", "v09_empty", "--reports", tmp_path), "v09_empty", "has no report")
    # short ids resolve (zz -> zz_first)
    proc = run("diff", "zz", "aa_second", "--reports", tmp_path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["a"] == "zz_first"
