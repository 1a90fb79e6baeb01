"""What the CLI says and what it costs to start: the migration table's speed-up column says what it was
computed against (an external subject against the ladder's top rung, set beside it), and ``whowaits --help``
loads neither pandas nor numpy (the crash supervisor hands its pipe to profiler.report only when something
imports it)."""

from __future__ import annotations

import os
import subprocess
import sys

try:
    from test_compare_helpers import ROOT, run
except ImportError:  # tests/ imported as a package
    from tests.test_compare_helpers import ROOT, run


def test_migration_table_says_what_the_speedup_is_against():
    proc = run("migration", env={"COLUMNS": "260"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "vs prev" not in out and "speed-up" in out
    rows: dict[str, str] = {}  # the first table's rows (the regions and phases tables name the versions again)
    for ln in out.split("speed-up:")[0].splitlines():
        if ln.startswith("│ ") and ln.split("│")[1].strip():
            rows[ln.split("│")[1].strip()] = ln.split("│")[4].strip()
    assert rows["ext-sdpa-flash"].endswith("x vs v12") and rows["ext-sdpa-cudnn"].endswith("x vs v12")
    assert rows["v12_intra_wg_overlap"].endswith("x") and "vs" not in rows["v12_intra_wg_overlap"]
    assert "external subjects are set beside the ladder's top rung" in out
    path, beside = out.split("Path of the top waiter")[1].split("Beside the top rung (v12_intra_wg_overlap)")
    assert "ext-sdpa" not in path.split("\nnote:")[0].replace("v12_intra_wg_overlap", "")
    assert [ln[:4] for ln in beside.splitlines() if ln.startswith("  - ")] == ["  - "] * 2
    assert "ext-sdpa-cudnn is" in beside and "ext-sdpa-flash is" in beside


def _imported(*argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "profiler.fastcli", *argv], cwd=ROOT,
                          capture_output=True, text=True, env=dict(os.environ, WHOWAITS_NO_RESULT_CACHE="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {ln.split("|")[-1].strip() for ln in proc.stderr.splitlines() if ln.startswith("import time:")}


def test_help_loads_no_analysis_library():
    mods = _imported("--help")
    assert {"typer", "profiler.cli"} <= mods
    assert not mods & {"pandas", "numpy", "pyarrow", "plotly", "pydantic", "profiler.report"}, mods & {
        "pandas", "numpy", "pyarrow", "plotly", "pydantic", "profiler.report"}


def test_the_supervisor_pipe_reaches_profiler_report_when_imported():
    code = ("import os, sys; import profiler.cli as c; r, w = os.pipe(); c._note_fd_on_import(w); "
            "assert 'profiler.report' not in sys.modules; from profiler import report; "
            "assert report.NATIVE_NOTE_FD == w, report.NATIVE_NOTE_FD; "
            "c._note_fd_on_import(w + 100); assert report.NATIVE_NOTE_FD == w + 100; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
