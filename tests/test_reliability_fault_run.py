"""The fault run's fast sample (scripts/fault_run.py --fast: every kind of fault once or twice, on copies of
committed reports) keeps the contract: no run fails. The full run's committed summary (reports/fault-run.json)
records its own sample and is checked for having no failure and covering every kind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_fast_fault_run_finds_no_failure(tmp_path):
    out = tmp_path / "fault.json"
    cp = subprocess.run([sys.executable, str(REPO / "scripts" / "fault_run.py"), "--fast", "--seed", "7",
                         "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    summary = json.loads(out.read_text())
    assert summary["failures"] == 0 and cp.returncode == 0, summary["failed_runs"]
    assert set(summary["by_kind"]) == {"mutant", "sidecar", "cache", "store", "sql", "policy", "signal"}
    assert summary["runs"] == sum(k["runs"] for k in summary["by_kind"].values()) >= 9


def test_the_committed_fault_run_summary():
    path = REPO / "reports" / "fault-run.json"
    summary = json.loads(path.read_text())
    assert summary["runs"] >= 200 and summary["failures"] == 0, summary["failed_runs"]
    assert set(summary["by_kind"]) == {"mutant", "sidecar", "cache", "store", "sql", "policy", "signal"}
    cache_cases = {c.split(":")[1] for c in summary["by_kind"]["cache"]["cases"]}
    assert cache_cases == {"flip", "truncate", "garbage", "swap", "link", "fifo", "directory"}
