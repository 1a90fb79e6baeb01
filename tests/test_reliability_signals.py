"""Signals reach ncu: SIGINT or SIGTERM sent to the ``whowaits`` process alone (not its group) while a
profiling session runs must stop ncu too, and wait for it, so no profiling session outlives whowaits (with the
real ncu that is a profiler holding the GPU). tests/fake_ncu stands in for ncu (FAKE_NCU_SLEEP keeps it
"profiling"; FAKE_NCU_TIMELINE tells its pid). A signal during start-up is never swallowed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "fake_ncu"
STARTER = REPO / "reports" / "h200" / "ext-sdpa-flash-fullset" / "b1_h64_s1024_d128_fp16.ncu-rep"
#: the console script as installed (fastcli -> supervisor fork -> CLI child), named whowaits
ENTRY = "import sys; sys.argv[0] = 'whowaits'; from profiler.fastcli import main; main()"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: nothing runs
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _start_profile(tmp_path: Path, new_session: bool = False, launcher: bool = False) -> tuple[subprocess.Popen, int]:
    """``whowaits profile --cmd …`` with the fake ncu sleeping 60 s; returns the process and ncu's pid (with
    ``launcher``, the profiler's below ncu's launcher script, as the real ncu runs)."""
    timeline = tmp_path / "timeline"
    env = dict(os.environ, PATH=f"{FAKE}{os.pathsep}{os.environ.get('PATH', '')}", FAKE_NCU_MODE="ok",
               FAKE_NCU_REPORT=str(STARTER), FAKE_NCU_SLEEP="60", FAKE_NCU_TIMELINE=str(timeline),
               PYTHONPATH=str(REPO), WHOWAITS_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("WHOWAITS_NCU", None)
    if launcher:
        env["FAKE_NCU_LAUNCHER"] = "1"
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, "profile", "--cmd", "python3 -c pass", "--kernel", "k",
                             "--name", "ext-x", "--out", str(tmp_path / "reports")], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=new_session)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if timeline.exists():
            starts = [ln.split() for ln in timeline.read_text().splitlines() if ln.startswith("start")]
            if starts:
                return proc, int(starts[0][2])
        if proc.poll() is not None:
            raise AssertionError(f"whowaits ended before ncu started: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the fake ncu never started")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_whowaits_alone_stops_ncu(tmp_path, sig):
    proc, ncu = _start_profile(tmp_path)
    assert _alive(ncu)
    os.kill(proc.pid, sig)  # the process alone, not its group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert err.strip() == ("whowaits: interrupted" if sig == signal.SIGINT else "whowaits: terminated"), err
    assert not _alive(ncu), "ncu outlived whowaits"
    assert not (tmp_path / "reports").exists() or not list((tmp_path / "reports").rglob("*.ncu-rep"))


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_whowaits_alone_stops_the_profiler_below_ncus_launcher(tmp_path, sig):
    """The real ncu is a launcher script whose child is the profiler, whose child is the profiled program: on
    the H200 a SIGTERM to whowaits alone once left both running after whowaits exited (only the launcher got
    the signal). Every process below ncu must be gone when whowaits exits."""
    proc, profiler_pid = _start_profile(tmp_path, launcher=True)
    timeline = tmp_path / "timeline"
    deadline = time.monotonic() + 30
    program = daemon = None
    while (program is None or daemon is None) and time.monotonic() < deadline:
        rows = [ln.split() for ln in timeline.read_text().splitlines()]
        program = next((int(r[2]) for r in rows if r[0] == "program"), None)
        daemon = next((int(r[2]) for r in rows if r[0] == "daemon"), None)
        time.sleep(0.05)
    assert program and daemon and _alive(profiler_pid) and _alive(program) and _alive(daemon)
    os.kill(proc.pid, sig)  # the process alone, not its group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert not _alive(profiler_pid), "the profiler below ncu's launcher outlived whowaits"
    assert not _alive(program), "the profiled program outlived whowaits"
    assert not _alive(daemon), "a detached process of the ncu session outlived whowaits"


@pytest.mark.slow
def test_a_signal_to_the_group_stops_everything(tmp_path):
    proc, ncu = _start_profile(tmp_path, new_session=True)
    os.killpg(proc.pid, signal.SIGTERM)  # whowaits' whole group (as `timeout` or a terminal's Ctrl-C does)
    proc.communicate(timeout=60)
    assert proc.returncode == 143 and not _alive(ncu)


def test_a_stop_raised_inside_a_finalizer_is_not_swallowed():
    """A signal that lands while Python runs a finalizer raises Stopped where Python can only print
    "Exception ignored": the command must still end as stopped (exit 143), silently about the finalizer."""
    code = r"""
import gc, os, signal, sys
sys.argv[0] = 'whowaits'
from profiler import cli
from profiler.cli._app import app

class Bomb:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered inside the finalizer

@app.command("_bomb")
def _bomb() -> None:
    b = Bomb()
    del b
    gc.collect()
    print("completed")

sys.exit(cli.run(["_bomb"]))
"""
    cp = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert cp.returncode == 143, (cp.stdout, cp.stderr)
    assert cp.stderr.strip() == "whowaits: terminated" and "Exception ignored" not in cp.stderr


@pytest.mark.slow
def test_a_stop_a_library_turned_into_its_own_error_is_still_a_stop():
    """DuckDB turns a signal that lands during a query into "RuntimeError: Query interrupted": that is the stop
    (one line, exit 130), not an internal error (exit 70)."""
    code = r"""
import os, signal, sys
sys.argv[0] = 'whowaits'
import duckdb
from profiler import cli
from profiler.cli._app import app

@app.command("_query")
def _query() -> None:
    import threading
    con = duckdb.connect()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # lands while DuckDB runs the query
    con.execute("SELECT sum(t1.range * 2) FROM range(4000000000) t1").fetchall()

sys.exit(cli.run(["_query"]))
"""
    # started as from a shell: SIGINT at its default (a test runner may hand its children SIGINT ignored)
    cp = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=str(REPO)),
                        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert cp.returncode == 130, (cp.stdout, cp.stderr)
    assert cp.stderr.strip() == "whowaits: interrupted"
