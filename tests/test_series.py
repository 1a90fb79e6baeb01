"""A user's own series: labels from report names or --label, a series file (TOML), diff with the
same labels, missing data said once, and `profile --cmd "… {version} …" --versions` through the repository's
fake ncu (tests/fake_ncu/). Reports are the public A100 CUTLASS series in tests/public-reports/."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CUT = ROOT / "tests" / "public-reports" / "cutlass-panjd123"
S4, S8, S8P = (CUT / f"report-{s}.ncu-rep" for s in ("s4", "s8", "s8-persist"))
ESMM = ROOT / "tests" / "public-reports" / "esmm-research" / "a10g-sgemm-default-set.ncu-rep"
FAKE = ROOT / "tests" / "fake_ncu"
KERNEL = "cutlass::Kernel"


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run ``whowaits ARGS`` in this process through the console script's ``main`` (its error handling
    included): exit code, stdout, stderr."""
    from profiler.cli import main

    def run(*args: str, env: dict | None = None) -> Result:
        monkeypatch.delenv("WHOWAITS_NCU", raising=False)
        monkeypatch.setenv("COLUMNS", "300")
        monkeypatch.setenv("WHOWAITS_NO_SUPERVISOR", "1")  # in this process, so that capsys sees the output
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        monkeypatch.setattr(sys, "argv", ["whowaits", *args])
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return run


@pytest.mark.parametrize("paths,labels", [
    (["x/cutlass/report-s4.ncu-rep", "x/cutlass/report-s8.ncu-rep", "x/cutlass/report-s8-persist.ncu-rep"],
     ["s4", "s8", "s8-persist"]),
    (["reports/h200/v03_x/b1_h64_s1024_d128_fp16.ncu-rep", "reports/h200/v04_y/b1_h64_s1024_d128_fp16.ncu-rep"],
     ["v03_x", "v04_y"]),
    (["ext/repo--report-step1.ncu-rep", "ext/repo--report-step2.ncu-rep", "ext/repo--report-step10.ncu-rep"],
     ["step1", "step2", "step10"]),
    (["a/report.ncu-rep", "a/report-2.ncu-rep"], ["report", "2"]),
    (["a/k.ncu-rep", "b/k.ncu-rep"], ["a", "b"]),
    (["one/x.ncu-rep"], ["x"]),
    (["reports/h200/mykernel-v1/b1_h64_s1024_d128_fp16.ncu-rep"], ["mykernel-v1"]),
])
def test_distinct_labels(paths, labels):
    from profiler.compare.series import distinct_labels

    assert distinct_labels(paths) == labels


def test_migration_of_paths_keeps_order_and_labels():
    from profiler.compare import load_versions, migrate

    m = migrate(profiled=load_versions([str(S8P), str(S4), str(S8)], kernels=[KERNEL]))
    assert m.versions == ["s8-persist", "s4", "s8"]
    assert list(m.table["version"]) == ["s8-persist", "s4", "s8"]
    m = migrate(profiled=load_versions([str(S4), str(S8)], kernels=[KERNEL], labels=["4 stages", "8 stages"]))
    assert m.versions == ["4 stages", "8 stages"]
    assert m.steps["sentence"][0].startswith("8 stages is 1.2x faster than 4 stages")


def test_one_report_many_kernels_labelled_by_kernel():
    from profiler.compare import load_versions

    ks = ["one_blocktiling", "two_blocktiling", "vectorized_blocktiling", "^void warptiling"]
    got = load_versions([str(ESMM)] * 4, kernels=ks)
    assert [p.label for p in got] == ["one_blocktiling", "two_blocktiling", "vectorized_blocktiling", "warptiling"]
    assert [round(p.summary["duration_ns"]) for p in got] == [431840, 295744, 262304, 226880]  # ncu's raw page


def _series(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "series.toml"
    p.write_text(body)
    return p


SERIES = f'''
title = "CUTLASS int8 GEMM on an A100: pipeline stages"

[[version]]
label = "4 stages"
report = "{S4}"
kernel = "{KERNEL}"
problem_flops = 2e9
change = "the CUTLASS default: 4-stage cp.async pipeline"
hypothesis = "loads wait at the barrier"

[[version]]
report = "{S8}"
kernel = "{KERNEL}"
problem_flops = 2e9
problem_bytes = 1e6
change = "8 stages"
hypothesis = "deeper pipeline hides the LDGSTS wait"
verdict = "1.2x faster; the BAR wait on LDGSTS stays on top"
'''


def test_series_file_gives_table_notes_and_html(tmp_path, cli):
    from profiler.compare import load_versions, migrate

    prof = load_versions([str(_series(tmp_path, SERIES))])
    assert [p.label for p in prof] == ["4 stages", "s8"]
    m = migrate(profiled=prof)
    t = m.table.set_index("version")
    # TFLOPS = the problem's FLOPs over ncu's duration (10.400 us and 8.512 us on ncu's raw page)
    assert t.loc["4 stages", "tflops"] == pytest.approx(2e9 / 10400 / 1e3)
    assert t.loc["s8", "tflops"] == pytest.approx(2e9 / 8512 / 1e3)
    assert t.loc["s8", "gbps"] == pytest.approx(1e6 / 8512)
    assert t.loc["s8", "verdict"].startswith("1.2x faster")
    assert t.loc["4 stages", "hypothesis"] == "loads wait at the barrier"
    assert len([n for n in m.notes if "needs ncu section" in n]) == 1  # both lack the same: one line

    out = tmp_path / "series.html"
    cp = cli("migration", str(tmp_path / "series.toml"), "--html", str(out))
    assert cp.returncode == 0, cp.stderr
    assert "8 stages" in cp.stdout and "deeper pipeline hides" in cp.stdout and "GB/s" in cp.stdout
    page = out.read_text()
    assert "CUTLASS int8 GEMM on an A100" in page and "deeper pipeline hides the LDGSTS wait" in page
    assert ">None<" not in page
    assert "id='v-4-stages'" in page and "href='#v-4-stages'" in page  # a label with a space: a working link


@pytest.mark.parametrize("body,needle", [
    ("", "no [[version]] tables"),
    ("[[version]]\nlabel = 'a'\n", "needs report"),
    ("[[version]]\nreport = 'nope.ncu-rep'\n", "no such report"),
    (f"[[version]]\nreport = '{S4}'\nproblem_flops = -1\n", "problem_flops must be a positive number"),
    (f"[[version]]\nreport = '{S4}'\nflops = 1\n", "unknown key(s) flops"),
    (f"[[version]]\nreport = '{S4}'\nlabel = 'a'\n[[version]]\nreport = '{S8}'\nlabel = 'a'\n", "label 'a' is used twice"),
    ("[[version]\n", "not a valid TOML file"),
])
def test_bad_series_file_is_one_line(tmp_path, body, needle, cli):
    cp = cli("migration", str(_series(tmp_path, body)))
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whowaits: error: ") and needle in lines[0], cp.stderr


def test_diff_takes_the_same_labels(cli):
    cp = cli("diff", str(S4), str(S8), "-k", KERNEL, "--format", "json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert (d["a"], d["b"]) == ("s4", "s8")
    assert len([n for n in d["notes"] if "needs ncu section" in n]) == 1
    cp = cli("diff", str(S4), str(S8), "-k", KERNEL, "--label", "four", "--label", "eight", "--format", "json")
    d = json.loads(cp.stdout)
    assert (d["a"], d["b"]) == ("four", "eight") and d["verdict"].startswith("eight is 1.2x faster than four")
    cp = cli("diff", str(S4), str(S8), "--label", "only-one")
    assert cp.returncode == 2 and "one --label per version" in cp.stderr
    series = CUT / "series.toml"
    cp = cli("diff", "s8", "s8-persist", "--series", str(series), "--format", "json")
    assert cp.returncode == 0, cp.stderr
    d = json.loads(cp.stdout)
    assert (d["a"], d["b"]) == ("s8", "s8-persist") and "as fast as s8" in d["verdict"]
    cp = cli("diff", "s8", "s16", "--series", str(series))
    assert cp.returncode == 2 and "no version labelled 's16'" in cp.stderr and "s4, s8, s8-persist" in cp.stderr


def test_problem_flops_for_report_paths(cli):
    cp = cli("migration", str(S4), str(S8), "-k", KERNEL, "--problem-flops", "2e9", "--problem-bytes", "1e6",
             "--format", "json")
    assert cp.returncode == 0, cp.stderr
    rows = json.loads(cp.stdout)["table"]
    assert rows[1]["tflops"] == pytest.approx(2e9 / 8512 / 1e3) and rows[1]["gbps"] == pytest.approx(1e6 / 8512)
    cp = cli("migration", str(S4), "--problem-flops", "-3")
    assert cp.returncode == 2 and "--problem-flops must be a positive number" in cp.stderr


def test_verbose_lists_fields(cli):
    cp = cli("migration", str(S4), str(S8), "-k", KERNEL, "--verbose")
    assert cp.returncode == 0, cp.stderr
    assert "s4:   roofline.bytes.smem ← WhowaitsRoofline" in cp.stdout
    assert "warpgroup_arrive" not in cp.stdout  # an A100 has no such reason: not a gap


# ------------------------------------------------------------------------------ profile --versions

def profile(cli, args: list[str], tmp_path: Path, mode: str = "ok"):
    env = {"PATH": f"{FAKE}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_NCU_MODE": mode,
           "FAKE_NCU_REPORT": str(S4), "FAKE_NCU_LOG": str(tmp_path / "ncu-calls.log")}
    return cli("profile", *args, "--out", str(tmp_path / "reports"), env=env)


def test_profile_versions_writes_one_report_each_ready_for_migration(tmp_path, cli):
    cp = profile(cli, ["--cmd", "python3 my_kernel.py --version {version}", "--versions", "v1,v2,v3",
                  "--kernel", KERNEL, "--name", "mykernel", "--problem-flops", "2e9"], tmp_path)
    assert cp.returncode == 0, cp.stderr
    calls = (tmp_path / "ncu-calls.log").read_text().splitlines()
    assert [c.split()[-1] for c in calls] == ["v1", "v2", "v3"]  # the program got each version
    from profiler import provenance

    gpu = tmp_path / "reports" / "h200"
    for i, v in enumerate(("v1", "v2", "v3")):
        reps = list((gpu / f"mykernel-{v}").glob("*.ncu-rep"))
        assert len(reps) == 1
        side = provenance.read_sidecar(reps[0])
        assert side["version"] == f"mykernel-{v}" and side["problem_flops"] == 2e9 and side["ladder_order"] == i
        assert side["ncu_command"][-1] == v and side["report_sha256"] == provenance.sha256_file(reps[0])
    assert "next: whowaits migration mykernel-v1 mykernel-v2 mykernel-v3" in cp.stdout

    cp = cli("migration", "--reports", str(gpu), "mykernel-v1", "mykernel-v2", "mykernel-v3", "-k", KERNEL,
             "--format", "json")
    assert cp.returncode == 0, cp.stderr
    m = json.loads(cp.stdout)
    assert m["versions"] == ["mykernel-v1", "mykernel-v2", "mykernel-v3"]
    assert m["table"][0]["tflops"] == pytest.approx(2e9 / 10400 / 1e3)  # from the sidecar's problem_flops

    # a shape key of the user's own problem names the report file
    cp = profile(cli, ["--cmd", "python3 gemm.py {version}", "--versions", "a", "--kernel", KERNEL, "--name", "gemm",
                       "--shape", "m384_n384_k384"], tmp_path)
    assert cp.returncode == 0, cp.stderr
    assert (gpu / "gemm-a" / "m384_n384_k384.ncu-rep").is_file()
    side = provenance.read_sidecar(gpu / "gemm-a" / "m384_n384_k384.ncu-rep")
    assert side["shape"] == "m384_n384_k384" and side["problem_flops"] is None  # no formula guessed for it

    again = profile(cli, ["--cmd", "python3 k.py {version}", "--versions", "v0,v3", "--kernel", KERNEL,
                     "--name", "mykernel"], tmp_path)
    assert again.returncode == 2 and "report exists" in again.stderr
    assert not (gpu / "mykernel-v0").exists()  # refused before anything ran


@pytest.mark.parametrize("args,needle", [
    (["--cmd", "python3 k.py", "--versions", "v1,v2", "--kernel", "k", "--name", "n"], "needs {version} in --cmd"),
    (["--cmd", "python3 k.py {version}", "--kernel", "k", "--name", "n"], "give --versions"),
    (["--cmd", "python3 k.py {version}", "--versions", "v1,,v2", "--kernel", "k", "--name", "n"], "comma-separated"),
    (["--cmd", "python3 k.py {version}", "--versions", "v1,v1", "--kernel", "k", "--name", "n"], "twice"),
    (["--cmd", "python3 k.py {version}", "--versions", "a/b", "--kernel", "k", "--name", "n"], "not a plain name"),
    (["--versions", "v1"], "go with --cmd"),
    (["--cmd", "python3 k.py {version}", "--versions", "v1", "--kernel", "k", "--name", "n",
      "--problem-flops", "0"], "positive"),
])
def test_profile_versions_bad_input(tmp_path, args, needle, cli):
    cp = profile(cli, args, tmp_path)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], cp.stderr
    assert not (tmp_path / "reports").exists()


def test_docs_series_example_is_a_valid_series_file(tmp_path):
    """The example series file of docs/your-kernel.md, pointed at a real report, loads with every key it shows."""
    import re
    import tomllib

    from profiler.compare.series import ENTRY_KEYS, load_series

    guide = (ROOT / "docs" / "your-kernel.md").read_text()
    block = re.search(r"\n(      title = .*?)\n\n", guide, re.S).group(1)
    text = "\n".join(ln[6:] for ln in block.splitlines())
    data = tomllib.loads(text)
    assert set(data["version"][0]) <= set(ENTRY_KEYS)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "tiled.ncu-rep").write_bytes(S4.read_bytes())
    s = _series(tmp_path, text)
    got = load_series(s).versions[0]
    assert got.label == "tiled" and got.problem_flops == 2 * 4096 ** 3 and got.report.is_file()
    assert load_series(CUT / "series.toml").versions[2].label == "s8-persist"


def test_series_html_renders_in_a_browser(tmp_path, cli):
    """One page over a public A100 report and the H800 report with launches ncu could not profile (merged
    launches, NaN metrics) loads in headless Chromium, draws every chart and logs no error."""
    try:
        from test_html_browser import CHROMIUM, IN_CI, _Plots, open_in_chromium
    except ImportError:
        from tests.test_html_browser import CHROMIUM, IN_CI, _Plots, open_in_chromium
    if CHROMIUM is None and not IN_CI:
        pytest.skip("chromium not installed (CI installs it)")
    h800 = ROOT / "tests" / "public-reports" / "sglang-flyinglandlord" / "h800-sampling-flash-full.ncu-rep"
    for name, args, n in (("mixed", [str(S4), str(h800)], 2),):
        out = tmp_path / f"{name}.html"
        cp = cli("report", *args, "--html", str(out))
        assert cp.returncode == 0, cp.stderr
        dom, console = open_in_chromium(out, tmp_path)
        p = _Plots()
        p.feed(dom)
        # 8 migration charts (4 + timelines, phases, warp states, regions) + 3 per version (stall reasons, who
        # waits on whom as a heat map and as a flow) + 1 per diff; neither report holds PM samples, so the diff
        # draws no timeline of its own; + the role wait graph of each version (both have sampled barrier wait
        # sites)
        expected = 8 + 3 * n + (n - 1) + n
        assert p.graph_divs == expected and p.rendered == expected, (name, p.graph_divs, p.rendered)
        assert p.root_attrs.get("data-errors") == "0", p.root_attrs.get("data-first-error")


def test_gap_line_absent_versus_partial():
    """A view is 'no …' only when its key values are all empty in the summary; one null reason is 'partial'."""
    from profiler.compare.gaps import gap_line, gaps

    s = {"device": {"cc": "8.0"}, "duration_ns": 5.0, "stall_samples": {"barrier": 3, "wait": None,
                                                                         "warpgroup_arrive": None},
         "launch": {"grid": None, "block": None},
         "missing": [{"field": "stall_samples.wait", "section": "WarpStateStats"},
                     {"field": "stall_samples.warpgroup_arrive", "section": "WarpStateStats (not on this chip)"},
                     {"field": "launch.grid", "section": "LaunchStats"}, {"field": "launch.block", "section": "LaunchStats"}]}
    g = gaps(s)
    assert g.absent == ["launch shape"] and g.partial == ["stall sampling"]
    assert [f["field"] for f in g.fields] == ["stall_samples.wait", "launch.grid", "launch.block"]  # CC 8.0: no wgmma
    assert gap_line("x", s) == ["x: no launch shape; partial stall sampling: needs ncu section(s) WarpStateStats, "
                                "LaunchStats (3 fields; --verbose lists them)"]
    assert gap_line("x", {"missing": []}) == []
    s["device"]["cc"] = "9.0"  # on Hopper the reason is a real gap
    assert "stall_samples.warpgroup_arrive" in [f["field"] for f in gaps(s).fields]
