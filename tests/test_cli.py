"""The installed ``whowaits`` console script itself: one smoke test per command (every other CLI
test runs in-process through :mod:`clirun`), and what only a real process can show: signals.

* every command and sub-command answers ``--help`` (exit 0, a usage text), all in one process;
* ``show`` on a committed report, and one bad input (one stderr line, exit 2);
* Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM during a cold
  ``migration``, while worker processes summarise: exactly one stderr line (``whowaits:
  interrupted`` / ``whowaits: terminated``), exit 130 / 143, no traceback from the parent or a
  worker, nothing on stdout, no temporary file left in the cache, no worker left running.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXE = shutil.which("whowaits", path=str(Path(sys.executable).parent)) or "whowaits"
V03 = ROOT / "reports" / "h200" / "v03_tensor_cores" / "b1_h64_s1024_d128_fp16.ncu-rep"


def _commands() -> list[list[str]]:
    """Every command path of the app, sub-commands of groups included."""
    from typer.main import get_command

    from profiler.cli import app

    out = []

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in sorted(subs.items()):
                walk(sub, path + [name])
        elif path:
            out.append(path)

    walk(get_command(app), [])
    return out


def _env(**extra) -> dict:
    return dict(os.environ, COLUMNS="200", **extra)


#: run in ONE interpreter: the console script's own file (runpy, as its shebang runs it; its
#: supervisor forks as usual) once per command, each with fds 1 and 2 sent to files of its own, so every command's exit code, stdout and
#: stderr are told apart. One process instead of one per command: 20.3 s of the suite on the
#: 2-core machine under load (20 processes at once, load average 3-5) -> ~1.5 s.
_HELP_ALL = r"""
import json, os, runpy, sys, tempfile
exe, cmds = sys.argv[1], json.loads(sys.argv[2])
res = []
me = os.getpid()
keep_out, keep_err = os.dup(1), os.dup(2)
for c in cmds:
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(fo.fileno(), 1); os.dup2(fe.fileno(), 2)
        sys.argv = [exe, *c, "--help"]
        try:
            runpy.run_path(exe, run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush(); sys.stderr.flush()
        if os.getpid() != me:  # the supervisor's forked child (profiler.cli._supervised) ends here
            os._exit(code)
        os.dup2(keep_out, 1); os.dup2(keep_err, 2)
        fo.seek(0); fe.seek(0)
        res.append([c, code, fo.read().decode(), fe.read().decode()])
print(json.dumps(res))
"""


def test_every_command_answers_help_through_the_console_script():
    import json

    cmds = _commands()
    assert {"show", "diff", "migration", "report"} <= {c[0] for c in cmds}
    exe = Path(EXE)
    assert exe.is_file(), EXE
    proc = subprocess.run([sys.executable, "-c", _HELP_ALL, str(exe), json.dumps(cmds)], capture_output=True,
                          text=True, env=_env(), timeout=300)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    results = json.loads(proc.stdout)
    assert [r[0] for r in results] == cmds
    for c, code, out, err in results:
        assert code == 0, (c, err)
        assert "Usage" in out and err == "", c
        assert f"whowaits {' '.join(c)}" in " ".join(out.split()), (c, out[:300])


def test_an_embedding_caller_of_main_runs_on_in_one_process_only():
    """main() called from other code (a test catching SystemExit): the supervisor's forked child runs the CLI and
    ends there, so the caller's code after main() runs once, in the parent, with the child's exit code. (Before:
    the child returned into the caller, which then ran on in both processes; a pytest run of main() hung, the
    parent waiting for a child that had gone back to running the test session.)"""
    code = ("import os, sys\n"
            "from profiler.cli import main\n"
            "sys.argv = ['whowaits', 'timeline', sys.argv[1], '--format', 'json']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print('caller after main', os.getpid(), e.code, flush=True)\n")
    report = ROOT / "reports/h200/v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep"
    proc = subprocess.run([sys.executable, "-c", code, str(report)], capture_output=True, text=True, env=_env(),
                          timeout=300, cwd=ROOT)
    after = [line for line in proc.stdout.splitlines() if line.startswith("caller after main")]
    assert proc.returncode == 0 and len(after) == 1, (proc.stdout[-500:], proc.stderr[-500:])
    _, _, _, pid, exit_code = after[0].split()
    assert exit_code == "0" and int(pid) > 0
    assert proc.stdout.count('"kernel"') == 1  # the timeline printed once, by the child


def test_show_and_one_bad_input_through_the_console_script(tmp_path):
    ok = subprocess.run([EXE, "show", str(V03), "--top", "2"], capture_output=True, text=True,
                        env=_env(), timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "Stall breakdown" in ok.stdout
    bad = subprocess.run([EXE, "diff", str(V03), str(tmp_path / "nope.ncu-rep")], capture_output=True,
                         text=True, env=_env(), timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [f"whowaits: error: no such report: {tmp_path / 'nope.ncu-rep'}"]


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


@pytest.mark.parametrize("sig,code,line", [(signal.SIGINT, 130, "whowaits: interrupted"),
                                           (signal.SIGTERM, 143, "whowaits: terminated")])
def test_a_signal_during_a_cold_migration_is_one_line(tmp_path, sig, code, line):
    cache = tmp_path / "cache"
    proc = subprocess.Popen([EXE, "migration", "--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True,
                            env=_env(WHOWAITS_CACHE_DIR=str(cache), WHOWAITS_PROCESSES="2"))
    # wait until the work is under way: a worker process started (or a first entry written)
    deadline = time.monotonic() + 90
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = _children(proc.pid)
        if workers or any(cache.glob("*.frames")):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "migration ended before it could be interrupted"
    time.sleep(0.3)
    workers = workers or _children(proc.pid)
    os.killpg(proc.pid, sig)  # the whole group, as a terminal's Ctrl-C
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert err.splitlines() == [line], err  # nothing from the workers either
    assert out == ""
    assert [p for p in cache.rglob("*") if p.name.endswith(".tmp")] == []
    time.sleep(0.2)
    alive = [w for w in workers if Path(f"/proc/{w}").exists()
             and "Z" not in Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1][:3]]
    assert alive == [], "a worker outlived the interrupted migration"
