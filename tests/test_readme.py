"""The README's commands are the ones that run: .ci/run runs exactly its test command, and its set-up installs the
project and runs the main job. (The rest of the front door: tests/test_docs.py.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_ci_runs_the_readme_test_command():
    test_cmd = re.search(r"^Test:\n\n    (.+)$", README, re.M).group(1).strip()
    ci = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == test_cmd


def test_readme_setup_installs_and_runs_the_main_job():
    setup = re.search(r"^Set-up.*\n\n    (.+)$", README, re.M).group(1)
    assert setup == ("python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
                     ".venv/bin/whowaits migration --html whowaits-report.html --force")
