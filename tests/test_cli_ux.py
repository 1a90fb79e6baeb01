"""What the CLI says and what it costs to start: the migration table's speed-up column says what it was
computed against (an external subject against the ladder's top rung, set beside it), and ``whowaits --help``
loads neither pandas nor numpy (the crash supervisor hands its pipe to profiler.report only when something
imports it)."""

from __future__ import annotations

import os
import re
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
    top_cell = [v for v in rows if not v.startswith("ext-")][-1]  # the ladder's top rung (its cell may be cut: …)
    m = re.search(r"Beside the top rung \((\S+)\)", out)
    assert m, out[-2000:]
    top = m.group(1)
    assert top.startswith(top_cell.rstrip("…")), (top, top_cell)
    short = top.split("_")[0]
    assert rows["ext-sdpa-flash"].endswith(f"x vs {short}") and rows["ext-sdpa-cudnn"].endswith(f"x vs {short}")
    assert rows[top_cell].endswith("x") and "vs" not in rows[top_cell]
    assert "external subjects are set beside the ladder's top rung" in out
    path, beside = out.split("Path of the top waiter")[1].split(f"Beside the top rung ({top})")
    assert "ext-sdpa" not in path
    assert [ln[:4] for ln in beside.splitlines() if ln.startswith("  - ")] == ["  - "] * 2
    # one sentence each against the top rung, in whichever of diff's three forms the times give (v17 on, cuDNN
    # and the top rung are within noise at b1_h64_s1024)
    for ext in ("ext-sdpa-cudnn", "ext-sdpa-flash"):
        assert re.search(rf"- {ext} (is [\d.]+x (faster|slower) than|runs as fast as) {top} ", beside), (ext, beside)


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


# --- progress bars: on stderr, on a terminal only; piped output is exactly what it was ---------
TERMINAL = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1", "COLUMNS": "120"}  # rich takes stderr for a terminal


def _piped_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "WHOWAITS_NCU")}


def test_profile_all_shows_a_bar_on_a_terminal_only(tmp_path):
    from kernels import registry

    ids = [v.id for v in registry.versions()]
    fake = ROOT / "tests" / "fake_ncu"
    env = dict(_piped_env(), PATH=f"{fake}{os.pathsep}{os.environ.get('PATH', '')}", FAKE_NCU_MODE="ok",
               FAKE_NCU_REPORT=str(ROOT / "reports/h200/ext-sdpa-flash-fullset/b1_h64_s1024_d128_fp16.ncu-rep"),
               FAKE_NCU_KERNELS=",".join(f"void whowaits::{i}::flash_fwd<__half>()" for i in ids),
               FAKE_NCU_LOG=str(tmp_path / "calls.log"))

    def profile(out, **extra):
        return subprocess.run([sys.executable, "-m", "profiler.fastcli", "profile", "--all", "--out", str(out)],
                              cwd=ROOT, env=dict(env, **extra), capture_output=True, text=True, timeout=300)

    piped = profile(tmp_path / "a")
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    term = profile(tmp_path / "b", **TERMINAL)
    assert term.returncode == 0, term.stderr
    assert term.stdout.replace(str(tmp_path / "b"), "X").splitlines()[:-1] == \
        piped.stdout.replace(str(tmp_path / "a"), "X").splitlines()[:-1]  # the last line: the session's wall time
    assert f"/{len(ids)}" in term.stderr and f"profiled {ids[-1]}" in term.stderr


def test_bench_and_tune_show_a_bar_on_a_terminal_only(monkeypatch):
    from kernels import bench, tune

    def fake_bench(names, shapes, log=print, **kw):
        for v in ("v01_naive", "v02_smem_tiling"):
            log(f"  {v}  1.0 ms")
        return []

    def fake_tune(version, shape, log=print, **kw):
        log("3 configs, 1 dropped (spills), 2 to time")
        for c in ("block_m=64", "block_m=128"):
            log(f"  {c}  1.0 ms")
        return [], None

    monkeypatch.setattr(bench, "run", fake_bench)
    monkeypatch.setattr(tune, "tune", fake_tune)
    for args, bar in ((["bench", "v01", "v02", "--format", "json"], "timing"),
                      (["tune", "v02", "--format", "json"], "tuning v02")):
        piped = run(*args, env={"FORCE_COLOR": None, "TTY_COMPATIBLE": None})
        assert piped.returncode == 0 and bar not in piped.stderr, piped.stderr
        term = run(*args, env=TERMINAL)
        assert term.returncode == 0 and term.stdout == piped.stdout, term.stderr
        assert bar in term.stderr, (args, term.stderr)
    assert "/2" in term.stderr  # tune: the total is known from the space's line


def test_sweep_shows_a_bar_on_a_terminal_only(tmp_path):
    try:
        from test_sweep import MANIFEST, env_for
    except ImportError:  # tests/ imported as a package
        from tests.test_sweep import MANIFEST, env_for
    (tmp_path / "sweep.toml").write_text(MANIFEST.replace('versions = ["v01", "v02", "v03"]', 'versions = ["v01"]'))

    def sweep(**extra):
        env = {k: v for k, v in env_for(tmp_path, FAKE_NCU_SLEEP="0.5", **extra).items()
               if extra or k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
        return subprocess.run([sys.executable, "-m", "profiler.fastcli", "sweep", str(tmp_path / "sweep.toml"),
                               "--format", "json", "--force"], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)

    piped = sweep()
    assert piped.returncode == 0 and "sweep" not in piped.stderr and "GPU-" not in piped.stderr, piped.stderr
    term = sweep(**TERMINAL)
    assert term.returncode == 0, term.stderr
    assert "/2" in term.stderr and ("GPU-" in term.stderr or "sweep" in term.stderr), term.stderr[-1000:]


# --- parameter coercion without pydantic (profiler/cli/_app.py: _lean_coercion) ------------------------------
SAMPLES = ["3", "0", "-1", " 7 ", "1.5", "x", "", "table", "JSON", "csv", "true", "no", "v07", "reports",
           "reports/h200/v07_tuned/b1_h64_s1024_d128_fp16.ncu-rep", "/nonexistent/x", ["a", "b"], ["3", "4"]]


def _params():
    import typer.main

    from profiler.cli import app

    root = typer.main.get_command(app)
    stack = [(root, name, cmd) for name, cmd in root.commands.items()]
    while stack:
        parent, name, cmd = stack.pop()
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            stack.append((cmd, sub_name, sub))
        for param in cmd.params:
            if hasattr(param, "type_descriptor"):
                yield cmd, param


def test_every_parameter_is_coerced_as_typer_would():
    import profiler.cli  # noqa: F401 (sets the lean coercion)
    from typer import core
    from typer._click import Context
    from typer._click.exceptions import BadParameter

    lean = core.build_runtime_param
    assert getattr(lean, "whowaits_lean", False), "typer's internals changed: the lean coercion is off"
    n_lean = n_params = 0
    for cmd, param in _params():
        n_params += 1
        mine = lean(param.type_descriptor)
        if type(mine).__name__ != "LeanRuntimeParam":
            continue
        n_lean += 1
        theirs = lean.typer_build(param.type_descriptor)
        ctx = Context(cmd)
        for v in SAMPLES:
            got = []
            for rp in (mine, theirs):
                try:
                    got.append(("ok", rp._coerce_value(v, param=param, ctx=ctx)))
                except BadParameter as exc:
                    got.append(("bad", type(exc).__name__))
            assert got[0] == got[1], (cmd.name, param.name, v, got)
    assert n_lean == n_params > 80  # every parameter of every command is one of the lean types


def test_a_computed_command_loads_no_pydantic():
    mods = _imported("show", "reports/h200/v07_tuned/b1_h64_s1024_d128_fp16.ncu-rep", "--format", "json", "--top", "3")
    assert "pandas" in mods and "pydantic" not in mods
