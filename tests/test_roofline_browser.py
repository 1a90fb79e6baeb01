"""The roofline figure read by a person: no text box overlaps another (versions are named by hover and the
legend, not by labels beside the points). Drawn by a real headless Chromium (Debian's ``chromium``), which
measures every text element's box on the page after plotly drew it. The harness is checked on the old
figure (a label beside every point) too, so the test can fail."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (CI installs it)")

# After plotly has drawn: every visible, non-empty <text> of the figure, and how many pairs of their boxes
# overlap by more than 2 px in both directions; written on <html> for --dump-dom to carry out.
_MEASURE = """<script>
window.addEventListener('load', () => setTimeout(() => {
  const boxes = [...document.querySelectorAll('.main-svg text')]
    .filter(t => t.textContent.trim() && t.getClientRects().length)
    .map(t => [t.textContent.trim(), t.getBoundingClientRect()]);
  let n = 0, pairs = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i][1], b = boxes[j][1];
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 2 && h > 2) { n++; if (pairs.length < 5) pairs.push(boxes[i][0] + '|' + boxes[j][0]); }
  }
  document.documentElement.setAttribute('data-texts', boxes.length);
  document.documentElement.setAttribute('data-overlaps', n);
  document.documentElement.setAttribute('data-pairs', pairs.join(';'));
}, 1500));
</script>"""


def _measure(fig, tmp_path) -> tuple[int, int, str]:
    page = tmp_path / "roofline.html"
    page.write_text(fig.to_html(include_plotlyjs=True, full_html=True).replace("</body>", _MEASURE + "</body>"))
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--window-size=1400,800", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    attrs = dict(re.findall(r'data-(texts|overlaps|pairs)="([^"]*)"', proc.stdout[:4000]))
    assert "texts" in attrs, "the measuring script did not run"
    return int(attrs["texts"]), int(attrs["overlaps"]), attrs.get("pairs", "")


@pytest.fixture(scope="module")
def migration():
    from profiler import compare

    return compare.migrate()


def test_roofline_has_no_overlapping_text_and_a_legend_entry_per_version(migration, tmp_path):
    from profiler import plots

    fig = plots.roofline_trajectory(migration.roofline, migration.roofs)
    points = [t for t in fig.data if t.mode == "markers"]
    assert all("text" not in (t.mode or "") for t in fig.data)
    named = [t.name for t in points if t.showlegend]
    assert sorted(named) == sorted(set(migration.roofline.dropna(subset=["intensity"])["version"]))  # each once
    assert all(t.hovertemplate.startswith(f"{t.name}: ") for t in points)
    texts, overlaps, pairs = _measure(fig, tmp_path)
    assert texts > 20 and overlaps == 0, pairs


def test_the_check_fails_on_labels_beside_the_points(migration, tmp_path):
    from profiler import plots

    fig = plots.roofline_trajectory(migration.roofline, migration.roofs)
    for t in fig.data:  # the old figure: each point labelled with its version, above it
        if t.mode == "markers":
            t.update(mode="markers+text", text=[t.name] * len(t.x), textposition="top center")
    texts, overlaps, _ = _measure(fig, tmp_path)
    assert overlaps > 0
