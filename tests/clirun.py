"""Run the ``whowaits`` CLI in this process (no tests here).

:func:`whowaits` goes through :func:`profiler.cli.run`, the same function the console script
calls (so exit codes and the one-line errors are the console script's own), inside typer's
``CliRunner`` isolation: stdout, stderr and environment variables swapped for the call. It
returns a :class:`subprocess.CompletedProcess` so tests read ``returncode``/``stdout``/``stderr``
as they would from a subprocess. One console-script smoke test per command (tests/test_cli.py)
proves the installed entry point itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def _cwd(path):
    if path is None:
        yield
        return
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


_COMMANDS: dict = {}


def _memoize_click_tree() -> None:
    """Build typer's click command tree of the app once per process, not on every call.

    ``Typer.__call__`` rebuilds the whole tree (every command's parameters from its signature) each
    time: 57-83 ms a call on the 2-core machine under load (load average 8), 14 s of the fuzz test's
    ~200 in-process calls. The console script runs one command per process, so this changes nothing
    it does; the tree is rebuilt whenever the app's registered commands or groups change."""
    import typer.main  # noqa: PLC0415

    if getattr(typer.main.get_command, "_clirun_memo", False):
        return
    build = typer.main.get_command

    def get_command(typer_instance):
        key = (id(typer_instance), len(typer_instance.registered_commands), len(typer_instance.registered_groups))
        hit = _COMMANDS.get(key)
        if hit is None or hit[0] is not typer_instance:
            hit = _COMMANDS[key] = (typer_instance, build(typer_instance))
        return hit[1]

    get_command._clirun_memo = True
    typer.main.get_command = get_command


def whowaits(*args, env: dict | None = None, cwd=ROOT, columns: int = 200) -> subprocess.CompletedProcess:
    """``whowaits ARGS`` in-process; ``env`` entries are set (None: unset) for the call."""
    from profiler.cli import run  # noqa: PLC0415

    _memoize_click_tree()

    argv = [str(a) for a in args]
    full_env = {"COLUMNS": str(columns), **(env or {})}
    runner = CliRunner()
    with _cwd(cwd), runner.isolation(env=full_env) as streams:
        code = run(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        out, err = streams[0].getvalue(), streams[1].getvalue()
    return subprocess.CompletedProcess(["whowaits", *argv], code, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, nothing on stdout, exactly one line on stderr starting ``whowaits: error:``, no
    traceback; returns the line."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert proc.stdout == "", proc.stdout[-500:]
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("whowaits: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]
