"""`whowaits report --html`: one self-contained file that a real headless Chromium (Debian's
``chromium``) loads offline, draws every chart of, and runs without a JavaScript error.

Skipped only where chromium is absent and we are not in CI; CI (``CI=true``) installs it and must
run this test. The harness is checked on a broken page too, so the test can fail."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

try:
    from test_compare_helpers import assert_user_error, run
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import assert_user_error, run

from profiler.compare import resolve_all

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
needs_browser = pytest.mark.skipif(CHROMIUM is None and not IN_CI, reason="chromium not installed (CI installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", "--dump-dom"]


def open_in_chromium(path, tmp_path) -> tuple[str, list[str]]:
    """DOM after load (and a virtual-time budget) and the page's console lines."""
    assert CHROMIUM, "chromium is required in CI (apt-get install -y chromium)"
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", path.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc.stdout, console


class _Plots(HTMLParser):
    """Counts plotly graph divs, those plotly rendered (class js-plotly-plot) and their main SVGs."""

    def __init__(self):
        super().__init__()
        self.graph_divs = self.rendered = self.main_svgs = 0
        self.root_attrs = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "html":
            self.root_attrs = a
        if tag == "div" and "plotly-graph-div" in classes:
            self.graph_divs += 1
            self.rendered += "js-plotly-plot" in classes
        if tag == "svg" and "main-svg" in classes:
            self.main_svgs += 1


@needs_browser
def test_report_loads_draws_and_logs_no_errors(tmp_path):
    out = tmp_path / "whowaits.html"
    proc = run("report", "--html", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    # self-contained: no external script, stylesheet or font
    assert not re.search(r"<(script|link)[^>]+(src|href)=['\"]?https?:", text)
    n_versions = len(resolve_all())  # what the report shows by default (one shape, one section set)
    dom, console = open_in_chromium(out, tmp_path)
    p = _Plots()
    p.feed(dom)
    # 8 migration charts (4 + timelines, phases, warp states, regions) + 3 per version (stall reasons, who waits
    # on whom as a heat map and as a flow) + 1 per consecutive
    # diff, and in a diff the tensor-pipe timelines (either side has PM samples) and warp states (either side)
    from profiler.compare import migrate

    m = migrate()
    tl = m.timelines
    curve = {v: bool(((tl["version"] == v) & (tl["series"] == "tensor_pct")).any()) for v in m.versions}
    warps = {v: bool(((tl["version"] == v) & tl["series"].str.startswith("warps_")).any()) for v in m.versions}
    pairs = list(zip(m.versions, m.versions[1:]))
    extra = sum(curve[a] or curve[b] for a, b in pairs) + sum(warps[a] or warps[b] for a, b in pairs)
    # one role graph per version whose summary has role edges with samples
    graphs = _role_graphs()
    expected = 8 + 3 * n_versions + (n_versions - 1) + extra + graphs
    assert p.graph_divs == expected
    assert p.rendered == expected, f"{p.rendered} of {expected} charts rendered"
    assert p.main_svgs >= expected
    assert p.root_attrs.get("data-errors") == "0", p.root_attrs.get("data-first-error")
    assert int(p.root_attrs.get("data-main-svgs", "0")) == p.main_svgs
    assert not [ln for ln in console if re.search(r"error|uncaught|failed", ln, re.I)], console
    for v in resolve_all():
        assert f"id=\"v-{v.label}\"" in dom


def _role_graphs() -> int:
    from profiler.compare import load_versions

    return sum(bool([e for e in (p.summary.get("role_edges") or []) if e.get("samples")]) for p in load_versions())


@needs_browser
def test_role_graphs_draw_in_chromium(tmp_path):
    """The role wait graph of a ladder rung and of cuDNN (marked inferred) load and draw."""
    out = tmp_path / "roles.html"
    proc = run("report", "--html", out, "v11_pingpong", "ext-sdpa-cudnn")
    assert proc.returncode == 0, proc.stderr
    dom, console = open_in_chromium(out, tmp_path)
    p = _Plots()
    p.feed(dom)
    assert p.graph_divs == p.rendered and p.root_attrs.get("data-errors") == "0"
    assert "who waits on whom between warp roles" in dom and "inferred (no source" in dom
    assert not [ln for ln in console if re.search(r"error|uncaught|failed", ln, re.I)], console


@needs_browser
def test_harness_catches_a_broken_page(tmp_path):
    from profiler.html import _ERROR_HOOK

    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html data-errors='0'><head>" + _ERROR_HOOK + "</head><body>"
                   "<script>console.error('boom'); undefinedFunction();</script></body></html>")
    dom, console = open_in_chromium(bad, tmp_path)
    p = _Plots()
    p.feed(dom)
    assert p.root_attrs.get("data-errors") == "2" and "boom" in p.root_attrs.get("data-first-error", "")
    assert any("boom" in ln for ln in console) and any("Uncaught" in ln for ln in console)


def test_report_refuses_to_overwrite_and_leaves_no_temp(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("keep me")
    assert_user_error(run("report", "--html", out, "ext-sdpa-flash"), "exists", "--force")
    assert out.read_text() == "keep me"
    assert_user_error(run("report", "--html", tmp_path / "no" / "dir" / "r.html", "ext-sdpa-flash"), "does not exist")
    assert_user_error(run("report", "--html", tmp_path / "x.html", "nope_version"), "unknown version")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]
