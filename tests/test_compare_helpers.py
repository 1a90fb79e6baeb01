"""Shared helpers of the compare tests (no tests here): run the ``whowaits`` CLI in-process
(:mod:`clirun`; tests/test_cli.py keeps one console-script smoke test per command)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
FLASH = REPORTS / "ext-sdpa-flash" / f"{SHAPE}.ncu-rep"
CUDNN = REPORTS / "ext-sdpa-cudnn" / f"{SHAPE}.ncu-rep"


def whowaits_exe() -> str:
    exe = Path(sys.executable).parent / "whowaits"
    return str(exe) if exe.exists() else shutil.which("whowaits")


def run(*args, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    try:
        from clirun import whowaits
    except ImportError:  # tests/ imported as a package
        from tests.clirun import whowaits
    return whowaits(*args, cwd=cwd, env=env)


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, one line on stderr starting ``whowaits: error:``, no traceback; returns the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("whowaits: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]
