"""The role wait graph in the HTML report: one plotly figure per version with role edges, the
cuDNN one marked inferred (its report carries no source of ours). The browser test beside
tests/test_html_browser.py draws it in headless Chromium."""

from __future__ import annotations

import re

try:
    from test_compare_helpers import run
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import run


def test_role_graph_per_version_and_cudnn_marked_inferred(tmp_path):
    out = tmp_path / "r.html"
    proc = run("report", "--html", out, "v10_warp_specialized", "v11_pingpong", "ext-sdpa-cudnn")
    assert proc.returncode == 0, proc.stderr
    # plotly's figure JSON escapes non-ASCII (→ is \\u2192)
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), out.read_text())
    titles = re.findall(r"([\w-]+): who waits on whom between warp roles \(arrow: waiter → releaser", text)
    assert titles == ["v10_warp_specialized", "v11_pingpong", "ext-sdpa-cudnn"], titles
    # only cuDNN's graph is marked inferred (ours have declared source regions)
    marked = re.findall(r"([\w-]+): who waits on whom between warp roles[^\"]*? — inferred \(no source", text)
    assert marked == ["ext-sdpa-cudnn"], marked
    # the edges drawn are the static graph's: v11's resolved rings
    assert "mbarrier@0x430×2" in text and "TMA ← producer" in text and "bar (runtime id)" in text


def test_role_graph_figure_dashes_inferred_pairs():
    from profiler import plots

    fig = plots.role_graph([
        {"waiter": "consumer", "barrier": "wgmma group", "releaser": "tensor core (wgmma)", "share": 0.2,
         "inferred": False},
        {"waiter": "producer", "barrier": "mbarrier@0x420×2", "releaser": "consumer", "share": 0.05,
         "inferred": True},
    ], title="t")
    lines = [t for t in fig.data if t.mode == "lines"]
    assert {t.line.dash for t in lines} == {"solid", "dash"}
    assert plots.role_graph([], title="t").layout.annotations  # the empty figure says why
