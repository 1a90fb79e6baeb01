"""The HTML report's ladder table read by a person: one line per version's change (and expected bottleneck),
the whole text folded under it (``<details>``). Checked on the committed ladder, and in headless Chromium:
every row stays short while folded, and the same table with the text unfolded is taller (so the check can fail)."""

from __future__ import annotations

import html as htmllib
import re
import shutil
import subprocess

import pytest

from profiler import html


@pytest.fixture(scope="module")
def migration():
    from profiler import compare

    return compare.migrate()


def test_one_line_and_the_whole_text_folded_under_it(migration):
    table = html._ladder_table(migration)
    folds = re.findall(r"<details class='fold'><summary>(.*?)</summary>(.*?)</details>", table, re.S)
    changes = [c for c in migration.table["change"] if isinstance(c, str) and len(c) > 64]
    assert len(changes) >= 8  # the ladder's change lines are long (163-444 characters)
    summaries = {htmllib.unescape(s) for s, _ in folds}
    wholes = {htmllib.unescape(w) for _, w in folds}
    for c in changes:
        assert c in wholes  # nothing lost
        line = html._one_line(c)
        assert line in summaries and len(line) <= 65 and line.endswith("…") and "\n" not in line
    assert html._fold("short text") == "short text" and html._fold(None) == html._e(None)
    assert html._one_line("First sentence. Second one.") == "First sentence.…"


def test_xu_pipe_column(migration):
    # ncu's counter where the report has it (v20 on), else the figure derived from the SASS, said so (v19)
    table = html._ladder_table(migration)
    assert "<th>XU (MUFU) pipe</th>" in table or "XU (MUFU) pipe</th>" in table
    rows = {re.search(r"#v-([^']+)'", r).group(1): r for r in table.split("<tr>")[1:] if "#v-" in r}
    assert "34.1% <span class='note'>from SASS</span>" in rows["v19_lazy_rescale"]
    assert "34.7%" in rows["v20_three_consumers"] and "from SASS" not in rows["v20_three_consumers"]
    # at head dim 128 the tensor pipe is the busier one in every version that uses it (v01 and v02 use none)
    assert "&gt; tensor pipe" not in table


_MEASURE = """<script>window.addEventListener('load', () => {
  const h = [...document.querySelectorAll('tr')].slice(1).map(r => r.getBoundingClientRect().height);
  document.documentElement.setAttribute('data-rowmax', Math.round(Math.max(...h)));
});</script>"""


def _row_max(page: str, tmp_path) -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    f = tmp_path / "ladder.html"
    f.write_text(page)
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--window-size=1400,900", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=3000", "--dump-dom", f.as_uri()], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-1000:]
    return int(re.search(r'data-rowmax="(\d+)"', proc.stdout).group(1))


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="chromium not installed (CI installs it)")
def test_folded_rows_stay_short_in_chromium(migration, tmp_path):
    table = html._ladder_table(migration)
    page = f"<!DOCTYPE html><html><head><meta charset='utf-8'><style>{html._CSS}</style></head><body>@TABLE@{_MEASURE}</body></html>"
    folded = _row_max(page.replace("@TABLE@", table), tmp_path)
    unfolded = _row_max(page.replace("@TABLE@", re.sub(r"<details class='fold'><summary>.*?</summary>(.*?)</details>", r"\1",
                                           table, flags=re.S)), tmp_path)
    assert folded <= 0.6 * unfolded, (folded, unfolded)  # folding takes the long text out of the row height
    assert folded <= 200, folded  # a few lines at most (titles wrap, they are not folded)
