"""The import graph: no cycles among profiler's and kernels' modules, and the layer contracts of
pyproject.toml ([tool.importlinter]) kept. .ci/run runs the same two commands before the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_no_import_cycles():
    proc = _run(sys.executable, "scripts/import_cycles.py")
    assert proc.returncode == 0 and proc.stdout.startswith("0 import cycle(s)"), proc.stdout


def test_layer_contracts_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = _run(str(lint), "--no-cache")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout
