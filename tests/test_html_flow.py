"""Who waits on whom as a flow (profiler/html_flow.py): producer instruction → waiting class·reason, one
Sankey per version in the HTML report. Its links on the committed reports, and in a real headless Chromium
(Debian's ``chromium``): every version's flow renders (one SVG node per producer and waiter) and no text
box overlaps another; the harness is checked on a crowded flow too, so the test can fail."""

from __future__ import annotations

import re
import subprocess

import pytest

try:
    from test_roofline_browser import _MEASURE, CHROMIUM
except ImportError:  # tests/ imported as a package
    from tests.test_roofline_browser import _MEASURE, CHROMIUM

from profiler import compare
from profiler.html_flow import MAX_LINKS, NO_PRODUCER, OTHER_PRODUCERS, flow_links, who_waits_flow

needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")


@pytest.fixture(scope="module")
def profiled():
    return compare.load_versions(compare.migrate().versions)


def test_links_are_the_scoreboard_stalls_by_producer(profiled):
    by = {p.label: p.summary for p in profiled}
    v03 = flow_links(by["v03_tensor_cores"])
    assert (v03[0]["producer"], v03[0]["waiter"]) == ("LDSM", "HMMA·short_scoreboard")  # the heaviest first
    assert v03[0]["share"] == pytest.approx(0.69, abs=0.01)
    for s in by.values():
        links = flow_links(s)
        drawn = [ln for ln in links if ln["producer"] not in (OTHER_PRODUCERS, NO_PRODUCER)]
        assert len(drawn) <= MAX_LINKS and [ln["share"] for ln in drawn] == sorted((ln["share"] for ln in drawn), reverse=True)
        resolved = sum(w["samples"] for w in s.get("waits_on") or [])
        total = sum(s["stall_samples"].values())
        unresolved = sum((s.get("waits_on_unresolved") or {}).values())
        # what is drawn is the scoreboard stalls, less merged crumbs under 0.05% of the samples
        assert sum(ln["samples"] for ln in links) <= resolved + unresolved + 1e-6
        assert sum(ln["samples"] for ln in links) >= resolved + unresolved - 0.001 * total * 3
    v12 = flow_links(by["v12_intra_wg_overlap"])  # 7 + 4 samples without a producer: 0.15% of the samples
    assert any(ln["producer"] == NO_PRODUCER and ln["waiter"] == "any·long_scoreboard" for ln in v12)
    assert flow_links({"stall_samples": {}, "waits_on": []}) == []
    assert who_waits_flow({"stall_samples": {"wait": 3}, "waits_on": []}).data == ()  # the empty figure


def _measure_page(figs, tmp_path) -> tuple[dict, str]:
    page = tmp_path / "flows.html"
    page.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                    + "".join(f.to_html(include_plotlyjs=(i == 0), full_html=False) for i, f in enumerate(figs))
                    + _MEASURE.replace("data-texts', boxes.length", "data-texts', boxes.length); "
                                       "document.documentElement.setAttribute('data-nodes', "
                                       "document.querySelectorAll('.sankey-node').length") + "</body></html>")
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--window-size=1400,800", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=15000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    attrs = dict(re.findall(r'data-(texts|overlaps|pairs|nodes)="([^"]*)"', proc.stdout[:6000]))
    assert "texts" in attrs, "the measuring script did not run"
    return attrs, proc.stdout


@needs_browser
def test_every_versions_flow_renders_without_overlapping_text(profiled, tmp_path):
    figs = [who_waits_flow(p.summary, title=f"{p.label}: who waits on whom, as a flow") for p in profiled]
    nodes = sum(len(f.data[0].node.label) for f in figs if f.data)
    attrs, _dom = _measure_page(figs, tmp_path)
    assert int(attrs["nodes"]) == nodes > 4 * len(profiled)  # every producer and waiter drawn
    assert int(attrs["texts"]) >= nodes and int(attrs["overlaps"]) == 0, attrs.get("pairs")


@needs_browser
def test_the_check_fails_on_a_crowded_flow(profiled, tmp_path):
    v02 = next(p.summary for p in profiled if p.label == "v02_smem_tiling")
    crowded = who_waits_flow(v02, max_links=40, pad=0)  # every crumb, no room between nodes
    attrs, _dom = _measure_page([crowded], tmp_path)
    assert int(attrs["overlaps"]) > 0
