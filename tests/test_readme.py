"""The README's claims are the committed data's: the ladder table equals the bench JSON it cites, and
.ci/run runs exactly the README's test command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SHAPES = ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_fp16")


def _table_rows() -> list[list[str]]:
    block = README.split("<!-- ladder-table")[1].split("<!-- /ladder-table -->")[0]
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and not ln.startswith("| ---")]
    return [[c.strip().strip("*") for c in r.strip("|").split("|")] for r in rows[1:]]


def _bench(shape: str) -> dict[str, dict]:
    date = re.search(r"<!-- ladder-table: generated from reports/h200/bench/(\d{4}-\d\d-\d\d(?:T\d{4})?)-", README).group(1)
    d = json.loads((ROOT / "reports/h200/bench" / f"{date}-{shape}.json").read_text())
    return {r["implementation"]: r for r in d["rows"]}


@pytest.mark.parametrize("col, shape", [(2, SHAPES[0]), (5, SHAPES[1])])
def test_ladder_table_is_the_bench_json(col, shape):
    bench = _bench(shape)
    rows = _table_rows()
    ladder = sorted(v for v in bench if re.match(r"v\d\d_", v))
    assert len(ladder) >= 9 and [r[0] for r in rows][: len(ladder)] == ladder
    flash, cudnn = bench["sdpa-flash"]["tflops"], bench["sdpa-cudnn"]["tflops"]
    for r in rows:
        t = bench[r[0]]["tflops"]
        assert float(r[col]) == pytest.approx(round(t, 1), abs=0.051), r
        assert float(r[col + 1]) == pytest.approx(100 * t / flash, abs=0.051), r
        assert float(r[col + 2]) == pytest.approx(100 * t / cudnn, abs=0.051), r


def test_ci_runs_the_readme_test_command():
    test_cmd = re.search(r"^Test:\n\n    (.+)$", README, re.M).group(1).strip()
    ci = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == test_cmd


def test_readme_setup_installs_and_runs_the_main_job():
    setup = re.search(r"^Set-up.*\n\n    (.+)$", README, re.M).group(1)
    assert "pip install -e '.[dev]'" in setup and "whowaits migration" in setup
