"""`whowaits check`: the project's own policy on the committed data, and planted regressions that must fail.

Planted inputs are copies of committed data with one thing changed (a lowered TFLOPS in a bench JSON, a
summary with 15 points of samples moved onto one wait, a real report that lacks a section); each must fail
with a message naming the rule, the value and the limit. Input errors exit 2 with one line on stderr.
"""

from __future__ import annotations

import copy
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from profiler import check
from profiler.check import render
from profiler.check.inputs import load_summary
from profiler.check.policy import load_policy, parse_share_key
from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parents[1]
POLICY = REPO / "whowaits.toml"
BENCH = REPO / "reports" / "h200" / "bench"
REPORTS = REPO / "reports" / "h200"
B1, B4 = "b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16"
LADDER = ["v01_naive", "v02_smem_tiling", "v03_tensor_cores", "v04_swizzle_cp_async", "v05_double_buffer",
          "v06_softmax_fusion", "v07_tuned", "v08_tma_mbarrier", "v09_wgmma"]
needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc")


def cli(capsys, *args) -> tuple[int, str, str]:
    """Run the console script's :func:`profiler.cli.run` in this process; (exit code, stdout, stderr)."""
    from clirun import whowaits

    proc = whowaits(*args)
    return proc.returncode, proc.stdout, proc.stderr


def failures(report) -> dict[tuple[str, str, str], object]:
    return {(r.version, r.shape, r.check): r for r in report.results if r.verdict != "pass"}


def bench_json(shape: str, version: str = "v07_tuned") -> Path:
    """The newest committed bench file of ``shape`` with a row for ``version`` (the one the checks read)."""
    return next(p for p in sorted(BENCH.glob(f"*-{shape}.json"), reverse=True)
                if any(r["implementation"] == version for r in json.loads(p.read_text())["rows"]))


def tflops(version: str, shape: str, of: str | None = None) -> float:
    """``version``'s TFLOPS in the newest bench file with a row for ``of`` (default: ``version`` itself), so a
    baseline's row comes from the same run as the rung it is compared with."""
    rows = json.loads(bench_json(shape, of or version).read_text())["rows"]
    return next(r["tflops"] for r in rows if r["implementation"] == version)


def planted_bench(tmp_path: Path, version: str, shape: str, factor: float) -> Path:
    """A copy of the committed bench folder in which ``version`` at ``shape`` runs ``factor``x longer."""
    out = tmp_path / "bench"
    shutil.copytree(BENCH, out)
    p = out / bench_json(shape, version).name
    data = json.loads(p.read_text())
    for r in data["rows"]:
        if r["implementation"] == version:
            r["ms"] *= factor
            r["tflops"] /= factor
    p.write_text(json.dumps(data))
    return out


def planted_reports(tmp_path: Path, replace: dict[str, Path]) -> Path:
    """reports/h200 with every version folder linked from the committed one, except ``replace``
    {version: file to put at <version>/<file name>}."""
    out = tmp_path / "reports" / "h200"
    out.mkdir(parents=True)
    for d in REPORTS.iterdir():
        if d.is_dir() and d.name not in replace:
            (out / d.name).symlink_to(d, target_is_directory=True)
    for version, src in replace.items():
        (out / version).mkdir()
        name = src.name if src.name.endswith(".summary.json") else f"{B1}.ncu-rep"
        (out / version / name).symlink_to(src)
    return out


def move_samples(summary: dict, dst: tuple[str, str], points: float) -> dict:
    """``points`` (a fraction of all samples) moved onto the who_waits cell ``dst`` from the other
    cells pro rata, with stall_samples, stall_share, who_waits and opcode_waits kept consistent."""
    s = copy.deepcopy(summary)
    n = sum(s["stall_samples"].values())
    move = round(points * n)
    others = [w for w in s["who_waits"] if (w["class"], w["reason"]) != dst]
    pool = sum(w["samples"] for w in others)
    taken = 0
    for w in others:
        k = min(w["samples"], round(move * w["samples"] / pool)) if w is not others[-1] else move - taken
        k = min(k, w["samples"])
        w["samples"] -= k
        s["stall_samples"][w["reason"]] -= k
        taken += k
    cell = next((w for w in s["who_waits"] if (w["class"], w["reason"]) == dst), None)
    if cell is None:
        cell = {"class": dst[0], "reason": dst[1], "samples": 0, "share": 0.0, "top_opcode": None,
                "top_address": 0, "top_sass": ""}
        s["who_waits"].append(cell)
    cell["samples"] += taken
    s["stall_samples"][dst[1]] = s["stall_samples"].get(dst[1], 0) + taken
    assert sum(s["stall_samples"].values()) == n
    for w in s["who_waits"]:
        w["share"] = w["samples"] / n
    s["stall_share"] = {r: v / n for r, v in s["stall_samples"].items()}
    by_class: dict = {}
    for w in s["who_waits"]:
        by_class[w["class"]] = by_class.get(w["class"], 0) + w["samples"]
    s["opcode_waits"] = [{"class": c, "samples": k, "share": k / n,
                          "top_reason": max((w for w in s["who_waits"] if w["class"] == c),
                                            key=lambda w: w["samples"])["reason"]}
                         for c, k in sorted(by_class.items(), key=lambda kv: -kv[1])]
    s["waits_on"] = [r for r in s["waits_on"] if (r["class"], r["reason"]) != dst]
    return s


# ----------------------------------------------------------------------------- the project's own gate

@needs_nvcc
def test_project_policy_holds(ladder_built):
    """whowaits.toml on the committed ladder: every rung's floor at both bench shapes, its headline
    waits, LDSM ways, build facts and complete reports all hold (this is what .ci/run enforces)."""
    report = check.run(policy=POLICY)
    bad = [r.message for r in report.results if r.verdict != "pass"]
    assert report.exit_code == 0, bad
    got = {(r.version, r.shape, r.check) for r in report.results}
    for v in LADDER:
        for shape in (B1, B4):
            assert (v, shape, "min_tflops") in got
            assert (v, shape, "no_spills") in got and (v, shape, "sass") in got
        assert (v, B1, "no_missing") in got and any(c.startswith("max_share[") for (x, s, c) in got if x == v)
    for v in LADDER[3:8]:  # the ldmatrix rungs (v09 reads shared memory through wgmma, no LDSM)
        assert (v, B1, "max_bank_conflict_ways") in got
    for v in LADDER[6:]:  # the rungs that beat SDPA's FlashAttention-2 in the same run
        assert (v, B1, "min_ratio[sdpa-flash]") in got and (v, B4, "min_ratio[sdpa-flash]") in got
    # the values are the measured ones: v07's floor check reads the bench file's own TFLOPS
    row = next(r for r in json.loads(bench_json(B1).read_text())["rows"] if r["implementation"] == "v07_tuned")
    res = next(r for r in report.results if (r.version, r.shape, r.check) == ("v07_tuned", B1, "min_tflops"))
    assert res.value == row["tflops"] and res.limit == 288


def test_policy_shape_of_committed_rules():
    pol = load_policy(POLICY)
    assert pol.reports == REPO / "reports/h200" and pol.bench == REPO / "reports/h200/bench"
    lines = POLICY.read_text().splitlines()
    for rule in pol.rules:  # line numbers point at the rule's own keys (GitHub annotations use them)
        assert lines[rule.line - 1].strip() == "[[check.rule]]"
        if rule.min_tflops is not None:
            assert lines[rule.lines["min_tflops"] - 1].startswith("min_tflops")
        assert rule.no_missing and rule.no_spills and rule.sass  # from [check.defaults]
    assert {v for r in pol.rules for v in r.versions} >= set(LADDER)


# ----------------------------------------------------------------------------- planted regressions

def test_lowered_tflops_fails_naming_rule_value_and_limit(tmp_path):
    bench = planted_bench(tmp_path, "v07_tuned", B1, 1.25)  # 321.0 -> 256.8 TFLOPS
    slow, flash = tflops("v07_tuned", B1) / 1.25, tflops("sdpa-flash", B1, of="v07_tuned")
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{REPORTS}"\nbench = "{bench}"\n'
                   f'[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\nmin_tflops = 288\n'
                   f'min_ratio = {{ sdpa-flash = 0.97 }}\nmin_relative = 0.97\n')
    report = check.run(policy=pol, baseline=str(bench_json(B1)))
    assert report.exit_code == 1
    f = failures(report)
    assert set(f) == {("v07_tuned", B1, "min_tflops"), ("v07_tuned", B1, "min_ratio[sdpa-flash]"),
                      ("v07_tuned", B1, "min_relative")}
    m = f[("v07_tuned", B1, "min_tflops")].message
    assert "min_tflops" in m and f"= {slow:.1f} TFLOPS" in m and ">= 288 TFLOPS" in m, m
    assert f"= {slow / flash:.3f} ({slow:.1f} / {flash:.1f} TFLOPS)" in f[("v07_tuned", B1, "min_ratio[sdpa-flash]")].message
    rel = f[("v07_tuned", B1, "min_relative")]
    assert rel.value == pytest.approx(1 / 1.25) and ">= 0.97" in rel.message


@needs_nvcc
def test_lowered_tflops_fails_the_project_policy_cli(tmp_path, capsys):
    bench = planted_bench(tmp_path, "v04_swizzle_cp_async", B4, 1.2)  # 294.7 -> 245.6 < 271
    slow = tflops("v04_swizzle_cp_async", B4) / 1.2
    code, out, err = cli(capsys, "check", "--policy", str(POLICY), "--bench", str(bench), "--format", "github")
    assert code == 1, err
    lines = [ln for ln in out.splitlines() if ln.startswith("::error ")]
    assert len(lines) == 1, out
    rule = next(r for r in load_policy(POLICY).rules if r.versions == ("v04_swizzle_cp_async",) and r.shape == B4)
    assert f",line={rule.lines['min_tflops']}," in lines[0]
    assert "file=" in lines[0] and "whowaits.toml" in lines[0]
    assert "min_tflops" in lines[0] and f"= {slow:.1f} TFLOPS" in lines[0] and ">= 271 TFLOPS" in lines[0]
    assert out.strip().splitlines()[-1].startswith("whowaits check: FAILED (")


def test_moved_stall_share_fails_ceiling_and_regression(tmp_path):
    """15 points of v07's samples moved onto HMMA·wait: the ceiling fails; moved onto a new barrier
    wait (which no ceiling names), no_regression against the committed report catches it."""
    real = load_summary(REPORTS / "v07_tuned" / f"{B1}.ncu-rep")
    for dst, check_name in ((("HMMA", "wait"), "max_share[HMMA·wait]"), (("BAR", "barrier"), None)):
        root = tmp_path / dst[1]
        planted = root / f"{B1}.summary.json"
        planted.parent.mkdir(parents=True)
        planted.write_text(json.dumps([move_samples(real, dst, 0.15)]))
        reports = planted_reports(root, {"v07_tuned": planted})
        pol = root / "whowaits.toml"
        pol.write_text('[check]\nreports = "reports/h200"\nbench = "reports/h200/bench"\n'
                       '[[check.rule]]\nversion = "v07_tuned"\nshape = "' + B1 + '"\n'
                       'max_share = { "HMMA·wait" = 0.35, "HMMA·short_scoreboard ← LDSM" = 0.15 }\n'
                       'no_regression = true\n')
        # the baseline: a folder laid out like the repository (the committed reports)
        report = check.run(policy=pol, baseline=str(REPO), bench=None, reports=reports)
        f = failures(report)
        if check_name:
            m = f[("v07_tuned", B1, check_name)].message
            assert "who_waits[HMMA·wait].share = 38.1%" in m and "<= 35.0%" in m, m
        else:
            assert not any(c.startswith("max_share") for (_, _, c) in f)
        reg = f[("v07_tuned", B1, "no_regression.share")]
        cell, reason = f"who_waits[{dst[0]}·{dst[1]}]", f"stall_share[{dst[1]}]"
        assert reg.field in (cell, reason) and cell in reg.message and reason in reg.message, reg.message
        assert reg.value == pytest.approx(0.15, abs=0.01) and f"+{100 * reg.value:.1f} points" in reg.message
        assert "<= +2 points" in reg.message
        # time is judged too: the newest committed bench has --repeat rounds (2026-12-01, 3 rounds) and is
        # both sides here, so it is within noise (with a one-round bench it would be an error, not a pass)
        times = [r for r in report.results if (r.version, r.shape, r.check) == ("v07_tuned", B1, "no_regression.time")]
        assert [r.verdict for r in times] == ["pass"]
        assert report.exit_code == 1


def test_report_missing_a_section_fails(tmp_path):
    """A real report without the whowaits sections (the --set full starter) where the gate expects
    a complete one: no_missing fails, naming the fields and sections."""
    fullset = REPORTS / "ext-sdpa-flash-fullset" / f"{B1}.ncu-rep"
    reports = planted_reports(tmp_path, {"ext-sdpa-flash": fullset})
    report = check.run(policy=POLICY, reports=reports) if shutil.which("nvcc") else None
    if report is None:  # without nvcc: the same rules minus build facts
        text = POLICY.read_text().replace("no_spills = true", "no_spills = false").replace("sass = true", "sass = false")
        (tmp_path / "whowaits.toml").write_text(text.replace('"reports/h200/bench"', f'"{BENCH}"'))
        report = check.run(policy=tmp_path / "whowaits.toml", reports=reports)
    f = failures(report)
    res = f[("ext-sdpa-flash", B1, "no_missing")]
    assert res.verdict == "fail" and report.exit_code == 1
    assert "roofline.bytes.smem (WhowaitsRoofline)" in res.message
    assert "roofline.smem.ldsm.wavefronts (WhowaitsPipes)" in res.message and "limit == none" in res.message
    assert all(k[0] == "ext-sdpa-flash" for k in f)


def test_bank_conflicts_ceiling(tmp_path):
    """v03's real 8-way LDSM report put where v07's should be: the 1-way ceiling fails."""
    reports = planted_reports(tmp_path, {"v07_tuned": REPORTS / "v03_tensor_cores" / f"{B1}.ncu-rep"})
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{reports}"\n[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\n'
                   'max_bank_conflict_ways = 1\n')
    res = check.run(policy=pol).results
    assert len(res) == 1 and res[0].verdict == "fail"
    assert res[0].message.startswith(f"v07_tuned @ {B1}: max_bank_conflict_ways: roofline.smem.ldsm.ways = 8-way, "
                                     "limit <= 1-way")


def test_l2_fanout_floor(tmp_path):
    """The L2 read fan-out floor on real reports: v36's b4 report (1.82x, its CTAs out of step) in v42's place fails
    v42's 2.2x floor, naming value and limit; v42's own (2.63x) passes; a report without the counters (v34's of
    07:06 UTC) gives an error result with the reason, never a pass."""
    b4 = "b4_h16_s4096_d128_fp16"
    t1525 = REPORTS / "ladder4" / "2026-12-03T1525" / "same-session"
    cases = {"out_of_step": (t1525 / "v36_warp_epilogue_only" / f"{b4}.ncu-rep", "fail"),
             "own": (REPORTS / "v42_whole_head_rounds" / f"{b4}.ncu-rep", "pass"),
             "no_counters": (REPORTS / "v34_q_regs" / f"{b4}.ncu-rep", None)}
    for name, (report, verdict) in cases.items():
        reports = tmp_path / name / "reports" / "h200"
        (reports / "v42_whole_head_rounds").mkdir(parents=True)
        (reports / "v42_whole_head_rounds" / f"{b4}.ncu-rep").symlink_to(report)
        pol = tmp_path / name / "whowaits.toml"
        pol.write_text(f'[check]\nreports = "{reports}"\n[[check.rule]]\nversion = "v42_whole_head_rounds"\n'
                       f'shape = "{b4}"\nmin_l2_fanout = 2.2\n')
        res = check.run(policy=pol).results
        if verdict is None:  # no value: an error result that says why, not a silent pass
            assert len(res) == 1 and res[0].verdict == "error", res[0].message
            assert "roofline.l2_reads.fanout = n/a" in res[0].message and "not collected" in res[0].message
            continue
        assert len(res) == 1 and res[0].verdict == verdict, (name, res[0].message)
        if verdict == "fail":
            assert res[0].message.startswith(f"v42_whole_head_rounds @ {b4}: min_l2_fanout: "
                                             "roofline.l2_reads.fanout = 1.82x, limit >= 2.2x"), res[0].message
    bad = tmp_path / "bad.toml"
    bad.write_text('[[check.rule]]\nversion = "v42_whole_head_rounds"\nmin_l2_fanout = "high"\n')
    with pytest.raises(WhowaitsError, match="min_l2_fanout"):
        load_policy(bad)


# ----------------------------------------------------------------------------- time against a baseline

def with_runs(path: Path, dest: Path, scale: dict[str, float], jitter=(0.99, 1.0, 1.01)) -> Path:
    """A copy of a committed bench file whose rows carry ``ms_runs`` (as ``bench --repeat 3`` writes):
    each row's median times ``jitter``, times ``scale[implementation]``."""
    data = json.loads(path.read_text())
    for r in data["rows"]:
        if r["ms"] is None:
            continue
        f = scale.get(r["implementation"], 1.0)
        r["ms_runs"] = [r["ms"] * f * j for j in jitter]
        r["ms"] *= f
        r["tflops"] /= f
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(data))
    return dest


def test_time_regression_uses_the_measured_spread(tmp_path):
    base = with_runs(bench_json(B1), tmp_path / "base" / bench_json(B1).name, {})
    cur = with_runs(bench_json(B1), tmp_path / "cur" / bench_json(B1).name,
                    {"v07_tuned": 1.10, "v06_softmax_fusion": 1.01})
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nbench = "{cur.parent}"\n[[check.rule]]\nversion = ["v06_softmax_fusion", "v07_tuned"]\n'
                   f'shape = "{B1}"\nno_regression = true\n')
    report = check.run(policy=pol, baseline=str(base))
    by = {r.version: r for r in report.results}
    assert by["v07_tuned"].verdict == "fail" and "1.100x slower" in by["v07_tuned"].message
    # 1% slower with a ±1% spread in 3 rounds is within noise: t(0.975, 4) = 2.776, se = 0.01·sqrt(2/3)
    assert by["v06_softmax_fusion"].verdict == "pass" and "within noise" in by["v06_softmax_fusion"].message
    assert report.exit_code == 1


def test_git_revision_baseline(tmp_path):
    """--baseline HEAD reads the committed bench files at HEAD (git show) into a temporary folder."""
    import dataclasses

    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    pol = tmp_path / "p.toml"
    pol.write_text(f'[check]\nbench = "{BENCH}"\n'
                   f'[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\nmin_relative = 0.97\n')
    policy = dataclasses.replace(load_policy(pol), path=POLICY)  # as if it sat at the repository root
    report = check.evaluate(policy, baseline="HEAD")
    assert report.baseline.startswith("HEAD (")
    (res,) = report.results
    assert res.check == "min_relative" and res.verdict == "pass"
    assert res.value == pytest.approx(1.0)  # the working tree's bench file is HEAD's


# ----------------------------------------------------------------------------- outputs

def test_junit_and_json(tmp_path, capsys):
    bench = planted_bench(tmp_path, "v07_tuned", B1, 1.25)
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{REPORTS}"\nbench = "{bench}"\n'
                   f'[[check.rule]]\nversion = ["v06_softmax_fusion", "v07_tuned"]\nshape = "{B1}"\nmin_tflops = 245\n'
                   'max_share = { "HMMA·wait" = 0.35 }\n')
    code, out, err = cli(capsys, "check", "--policy", str(pol), "--format", "junit")
    assert code == 0, err  # newest b1 run (2026-12-02T0045): v06 259.0 and v07 313.0 / 1.25 = 250.4 TFLOPS, both >= 245
    root = ET.fromstring(out)
    suite = root.find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "0"
    names = {(c.get("classname"), c.get("name")) for c in suite.iter("testcase")}
    assert (f"v07_tuned.{B1}", "min_tflops") in names and (f"v06_softmax_fusion.{B1}", "max_share[HMMA·wait]") in names
    pol.write_text(pol.read_text().replace("min_tflops = 245", "min_tflops = 255"))  # v07 fails, v06 passes
    code, out, _ = cli(capsys, "check", "--policy", str(pol), "--format", "junit")
    assert code == 1
    fails = ET.fromstring(out).findall(".//failure")
    slow = tflops("v07_tuned", B1) / 1.25
    assert len(fails) == 1 and f"= {slow:.1f} TFLOPS" in fails[0].get("message")
    assert ">= 255 TFLOPS" in fails[0].get("message")
    code, out, _ = cli(capsys, "check", "--policy", str(pol), "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["counts"] == {"pass": 3, "fail": 1, "error": 0}
    assert {r["field"] for r in data["results"]} == {"bench.tflops", "who_waits[HMMA·wait].share"}
    code, out, _ = cli(capsys, "check", "--policy", str(pol))
    assert code == 1 and "FAIL" in out and "max_share[HMMA·wait]" in out and "rule 1: v07_tuned" in out


def test_github_escaping():
    from profiler.check.evaluate import CheckReport, Result

    r = Result(rule=1, check="min_tflops", version="v", shape=None, field="f", value=1.0, value_text="1",
               op=">=", limit=2.0, limit_text="2", verdict="fail", message="50%: a,b\nc", line=7)
    text = render.to_github(CheckReport(policy="whowaits.toml", baseline=None, results=[r]))
    assert text.splitlines()[0] == "::error file=whowaits.toml,line=7,title=whowaits check min_tflops::50%25: a,b%0Ac"


# ----------------------------------------------------------------------------- input errors: exit 2

@pytest.mark.parametrize("body, words", [
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nmax_share = { "HMMA·wiat" = 0.3 }\n', "unknown stall reason 'wiat'"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nmax_share = { "HMMMA·wait" = 0.3 }\n', "unknown opcode class 'HMMMA'"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nmax_share = { "HMMA·wait ← LDZ" = 0.3 }\n', "unknown producer opcode"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nmax_share = { "wait" = 35 }\n', "fraction of all samples"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nmin_tflop = 3\n', "unknown key(s) min_tflop"),
    ('[check]\n[[check.rule]]\nshape = "b1_h64_s1024_d128_fp16"\nmin_tflops = 3\n', "'version' is required"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\n', "checks nothing"),
    ('[check]\nfoo = 1\n', "unknown key(s) in [check]: foo"),
    ('[chek]\n', "no [check] table"),
    ('[check\n', "invalid toml"),
    ('[check]\n[[check.rule]]\nversion = "v07_tuned"\nshape = "b2_h1"\nmin_tflops = 3\n', "not a shape key"),
])
def test_bad_policy_is_one_line_exit_2(tmp_path, capsys, body, words):
    pol = tmp_path / "whowaits.toml"
    pol.write_text(body)
    code, out, err = cli(capsys, "check", "--policy", str(pol))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("whowaits: error: ") and words in err, err


@pytest.mark.parametrize("rule, extra, words", [
    ('shape = "b8_h8_s8192_d128_fp16"\nmin_tflops = 1\n', [], "no bench file for shape b8_h8_s8192_d128_fp16"),
    (f'shape = "{B1}"\nmin_relative = 0.97\n', [], "none is given: pass --baseline"),
    (f'shape = "{B1}"\nmin_relative = 0.97\n', ["--baseline", "nope.json"], "no such file, folder or git revision"),
    (f'shape = "{B4}"\nmin_relative = 0.97\n', ["--baseline", str(bench_json(B1))], "not b4_h16_s4096_d128_fp16"),
    (f'shape = "{B4}"\nmax_share = {{ wait = 0.5 }}\n', [], "no report for v07_tuned at b4_h16_s4096_d128_fp16"),
    (f'shape = "{B1}"\nmin_tflops = 1\n', ["--bench", "no/such/folder"], "no such bench file or folder"),
])
def test_missing_input_is_an_error_not_a_pass(tmp_path, capsys, rule, extra, words):
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "{REPORTS}"\nbench = "{BENCH}"\n[[check.rule]]\nversion = "v07_tuned"\n{rule}')
    code, out, err = cli(capsys, "check", "--policy", str(pol), *extra)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and words in err, err


def test_input_error_as_github_annotation(tmp_path, capsys):
    code, out, err = cli(capsys, "check", "--policy", str(POLICY), "--bench", str(tmp_path / "none"), "--format", "github")
    assert code == 2 and err.startswith("whowaits: error: no such bench file or folder")
    assert out.startswith("::error title=whowaits check%3A input error::no such bench file or folder")


def test_missing_policy(tmp_path, capsys, monkeypatch):
    code, _, err = cli(capsys, "check", "--policy", str(tmp_path / "none.toml"))
    assert code == 2 and "no such policy file" in err
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WhowaitsError, match="no policy found"):
        check.find_policy(tmp_path)


def test_pyproject_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.whowaits.check]\nbench = "' + str(BENCH) + '"\n\n'
        '[[tool.whowaits.check.rule]]\nversion = "v07_tuned"\nshape = "' + B1 + '"\nmin_tflops = 288\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    found = check.find_policy(sub)
    assert found == tmp_path / "pyproject.toml"
    pol = load_policy(found)
    assert pol.rules[0].line == 7 and pol.rules[0].lines["min_tflops"] == 10
    (res,) = check.run(policy=found).results
    assert res.verdict == "pass" and res.value > 288


def test_share_keys():
    assert parse_share_key("wait").field == "stall_share.wait"
    assert parse_share_key("HMMA.wait").field == "who_waits[HMMA·wait].share"
    k = parse_share_key("HMMA.short_scoreboard<-LDSM")
    assert k.text == "HMMA·short_scoreboard ← LDSM" and k.field == "waits_on[HMMA·short_scoreboard ← LDSM].share"


# ----------------------------------------------------------------------------- the gate's page, docs/gate.md

def _gate_section() -> str:
    return (REPO / "docs" / "gate.md").read_text()


def test_gate_doc_policy_example_loads(tmp_path):
    block = _gate_section().split("```toml\n")[1].split("```")[0]
    pol = tmp_path / "whowaits.toml"
    pol.write_text(block)
    p = load_policy(pol)
    (rule,) = p.rules
    assert p.baseline == "main" and p.share_tolerance == 0.02 and p.time_tolerance == 0.02
    assert all(rule.has(c) for c in check.policy.CHECKS), [c for c in check.policy.CHECKS if not rule.has(c)]
    assert {k.field for k in rule.max_share} == {"stall_share.wait", "who_waits[HMMA·wait].share",
                                                  "waits_on[HMMA·short_scoreboard ← LDSM].share"}


def test_gate_doc_ci_job_uses_real_options(capsys):
    """Every `whowaits <cmd> … --option` in docs/gate.md's GitHub Actions job is an option of that command."""
    import re

    job = _gate_section().split("```yaml\n")[1].split("```")[0].replace(">-\n", " ")
    calls = re.findall(r"whowaits (\w+)((?:\s+[^\n|>]*)?)", " ".join(job.split("\n          ")))
    assert {c for c, _ in calls} >= {"bench", "profile", "check"}
    for cmd, args in calls:
        code, out, _ = cli(capsys, cmd, "--help")
        assert code == 0
        for opt in re.findall(r"(--[a-z][a-z-]*)", args):
            assert opt in out, f"whowaits {cmd} has no {opt}"
    assert "--format github" in job and "--format junit" in job


@needs_nvcc
def test_build_facts_fail_on_a_spilling_config_and_a_false_sass_claim(tmp_path, monkeypatch):
    """v02 as if its version.toml chose 64x8 tiles (a config the tuner drops: ptxas spills; the same build
    test_tune makes, so the build cache serves both) and claimed HGMMA: both build checks fail."""
    import dataclasses

    from kernels import registry

    real_get = registry.get
    v02 = real_get("v02_smem_tiling")
    planted = dataclasses.replace(v02, config=v02.config.replace(block_m=64, block_n=8, warps=4),
                                  expect_sass=v02.expect_sass + ("HGMMA",))
    monkeypatch.setattr(registry, "get", lambda vid, root=None: planted if vid == v02.id else real_get(vid, root))
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\n[[check.rule]]\nversion = "v02_smem_tiling"\nshape = "{B1}"\nno_spills = true\nsass = true\n')
    report = check.run(policy=pol)
    by = {r.check: r for r in report.results}
    assert report.exit_code == 1 and by["no_spills"].verdict == "fail" and by["sass"].verdict == "fail"
    assert by["no_spills"].value > 0 and "B spill stores" in by["no_spills"].message
    assert f"build.spill_bytes = {by['no_spills'].value} B, limit == 0 B" in by["no_spills"].message
    assert "expected HGMMA absent" in by["sass"].message and "forbidden" not in by["sass"].value_text


@pytest.mark.parametrize("break_it, words", [
    (lambda s: "{", "not a summary file (JSONDecodeError"),
    (lambda s: [], "not a summary file"),
    (lambda s: [{**s, "stall_samples": {**s["stall_samples"], "wait": "many"}}],
     "summary stall_samples.wait: expected an integer"),
    (lambda s: [{**s, "who_waits": [{"class": "HMMA"}]}], "summary who_waits[0].reason: missing"),
    (lambda s: [{**s, "missing": "none"}], "summary missing: expected a list"),
    (lambda s: [{k: v for k, v in s.items() if k != "waits_on"}], "summary waits_on: missing"),
    (lambda s: [{**s, "stall_samples": {**s["stall_samples"], "wait": -5}}], "stall_samples.wait is negative"),
])
def test_bad_summary_file_is_one_line_exit_2(tmp_path, capsys, break_it, words):
    """A stand-in summary is checked against profiler.schema (plus non-negative counts) before use."""
    real = load_summary(REPORTS / "v07_tuned" / f"{B1}.ncu-rep")
    bad = break_it(real)
    (tmp_path / "v07_tuned").mkdir()
    (tmp_path / "v07_tuned" / f"{B1}.summary.json").write_text(bad if isinstance(bad, str) else json.dumps(bad))
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "."\n[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\nno_missing = true\n')
    code, out, err = cli(capsys, "check", "--policy", str(pol))
    assert code == 2 and err.count("\n") == 1 and words in err, err


def test_real_summary_file_stands_in_for_its_report(tmp_path):
    """`whowaits show REPORT --format json` output passes the schema and gives the report's own values."""
    real = load_summary(REPORTS / "v07_tuned" / f"{B1}.ncu-rep")
    (tmp_path / "v07_tuned").mkdir()
    (tmp_path / "v07_tuned" / f"{B1}.summary.json").write_text(json.dumps([real]))
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nreports = "."\n[[check.rule]]\nversion = "v07_tuned"\nshape = "{B1}"\n'
                   'max_share = { "HMMA·wait" = 1.0, "wait" = 1.0 }\n')
    from_json = {r.check: r.value for r in check.run(policy=pol).results}
    pol.write_text(pol.read_text().replace('reports = "."', f'reports = "{REPORTS}"'))
    from_report = {r.check: r.value for r in check.run(policy=pol).results}
    assert from_json == from_report and from_json["max_share[wait]"] == real["stall_share"]["wait"]


def test_rule_with_only_inherited_checks_and_no_data_is_an_error(tmp_path, capsys):
    pol = tmp_path / "whowaits.toml"
    pol.write_text('[check]\nreports = "."\n[check.defaults]\nno_missing = true\n[[check.rule]]\nversion = "ext-none"\n')
    code, _, err = cli(capsys, "check", "--policy", str(pol))
    assert code == 2 and "rule 1 checks nothing for ext-none" in err, err


def test_newest_bench_row_per_implementation(tmp_path):
    """A newer bench run of a few rows (v07 and the baselines, v07 1.25x slower) sits beside the full
    committed run: v07 and its ratio come from the new run, v06 from the older one."""
    bench = tmp_path / "bench"
    shutil.copytree(BENCH, bench)
    data = json.loads(bench_json(B1).read_text())
    data["rows"] = [r for r in data["rows"] if r["implementation"] in ("v07_tuned", "sdpa-flash")]
    data["rows"][0]["ms"] *= 1.25
    data["rows"][0]["tflops"] /= 1.25
    (bench / f"2099-01-01-{B1}.json").write_text(json.dumps(data))
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nbench = "bench"\n[[check.rule]]\nversion = ["v06_softmax_fusion", "v07_tuned"]\n'
                   f'shape = "{B1}"\nmin_tflops = 255\nmin_ratio = {{ sdpa-flash = 0.5 }}\n')  # v07 250.4, v06 259.0
    res = {(r.version, r.check): r for r in check.run(policy=pol).results}
    assert res[("v07_tuned", "min_tflops")].verdict == "fail"
    assert res[("v07_tuned", "min_tflops")].source.endswith(f"2099-01-01-{B1}.json")
    assert res[("v06_softmax_fusion", "min_tflops")].verdict == "pass"
    assert res[("v06_softmax_fusion", "min_tflops")].source.endswith(bench_json(B1).name)
    # ratios stay within one run: v07's is against the new run's sdpa-flash row
    expect = tflops("v07_tuned", B1) / 1.25 / tflops("sdpa-flash", B1, of="v07_tuned")
    assert res[("v07_tuned", "min_ratio[sdpa-flash]")].value == pytest.approx(expect, rel=1e-12)


def test_bench_files_take_a_same_day_rerun_as_newer(tmp_path):
    # a second run of one day is committed as <date>T<HHMM>-<shape>.json (reports/h200/bench/2026-12-01T0925-*)
    # and must sort before that day's plain file, so a check reads its rows first
    from profiler.check.inputs import BENCH_NAME, bench_files

    for name in ("2026-12-01-b1_h64_s1024_d128_fp16.json", "2026-12-01T0925-b1_h64_s1024_d128_fp16.json",
                 "2026-11-30-b1_h64_s1024_d128_fp16.json", "2026-12-01T9-b1_h64_s1024_d128_fp16.json"):
        (tmp_path / name).write_text("{}")
    assert BENCH_NAME.match("2026-12-01T0925-b4_h16_s4096_d128_fp16_causal.json").groups() == (
        "2026-12-01T0925", "b4_h16_s4096_d128_fp16_causal")
    assert [p.name for p in bench_files(tmp_path)["b1_h64_s1024_d128_fp16"]] == [
        "2026-12-01T0925-b1_h64_s1024_d128_fp16.json", "2026-12-01-b1_h64_s1024_d128_fp16.json",
        "2026-11-30-b1_h64_s1024_d128_fp16.json"]


def test_a_ratio_rule_reads_the_newest_run_that_has_all_its_rows(tmp_path):
    """v14's b1 rule compares it with v13 (whowaits.toml). In the committed runs as they stood before the full
    bench of 2026-12-02T0045 (that run's files left out of a copy of the folder), the newest b1 run with v14
    (2026-12-02T0002, v12 v14 v17 v18 + baselines) has no v13 row, so the rule reads 2026-12-01T2332 (the full
    bench of v01-v19), where v14 504.8 / v13 487.8 TFLOPS = 1.035; before, the check stopped with an error. With
    T0045 in the folder the same rule reads T0045 (v14 499.0 / v13 478.4)."""
    bench = tmp_path / "reports" / "h200" / "bench"
    # the runs as they stood before T0045: that run's files and every later one (ladder IV, 2026-12-02T1518 on) left
    # out (file names start with the run's UTC stamp, so they sort in time)
    shutil.copytree(BENCH, bench, ignore=lambda _dir, names: [n for n in names if n[:15] >= "2026-12-02T0045"])
    for d in REPORTS.iterdir():  # the committed reports beside the copied bench folder
        if d.name != "bench":
            (tmp_path / "reports" / "h200" / d.name).symlink_to(d)
    pol = tmp_path / "whowaits.toml"
    text = (POLICY.parent / "whowaits.toml").read_text()
    iv = text.index("# ---------------------------------------------------------------- ladder IV")
    ext = text.index("# ---------------------------------------------------------------- the external subjects")
    pol.write_text(text[:iv] + text[ext:])  # ladder IV's rules read the runs left out above
    res = [r for r in check.run(policy=pol).results if r.version == "v14_cross_tile_qk" and r.shape == B1]
    ratio = next(r for r in res if r.check == "min_ratio[v13_persistent]")
    assert ratio.source.endswith(f"2026-12-01T2332-{B1}.json") and ratio.verdict == "pass"
    assert ratio.value == pytest.approx(504.8151742127612 / 487.8427197187021, rel=1e-9)
    floor = next(r for r in res if r.check == "min_tflops")
    assert floor.source == ratio.source  # one rule, one run
    newest = sorted(bench.glob(f"*-{B1}.json"))[-1]
    rows = {r["implementation"] for r in json.loads(newest.read_text())["rows"]}
    assert "v14_cross_tile_qk" in rows and "v13_persistent" not in rows  # the case this test is about
    full = [r for r in check.run(policy=POLICY.parent / "whowaits.toml").results
            if r.version == "v14_cross_tile_qk" and r.shape == B1 and r.check == "min_ratio[v13_persistent]"]
    assert full[0].source.endswith(f"2026-12-02T0045-{B1}.json")
    assert full[0].value == pytest.approx(tflops("v14_cross_tile_qk", B1) / tflops("v13_persistent", B1), rel=1e-9)


def test_a_ratio_rule_without_any_run_of_all_its_rows_is_an_error(tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(REPO / f"reports/h200/bench/2026-12-02T0002-{B1}.json", bench)
    pol = tmp_path / "whowaits.toml"
    pol.write_text(f'[check]\nbench = "bench"\n[[check.rule]]\nversion = "v14_cross_tile_qk"\nshape = "{B1}"\n'
                   f'min_ratio = {{ v13_persistent = 1.0 }}\n')
    with pytest.raises(WhowaitsError, match="no row for v13_persistent.*bench them in one run: whowaits bench "
                                            "v14_cross_tile_qk v13_persistent"):
        check.run(policy=pol)
