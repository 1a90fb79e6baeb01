"""Command-line interface: a thin layer, one module per command group, each over a public function.

Every module imports ``app`` from ``_app`` and registers its commands on it.

:func:`run` is the one place the CLI's failures become exit codes, each with at most one line on
stderr and no traceback:

* a :class:`profiler.errors.WhowaitsError` (bad input: a missing or corrupt report, an unknown
  version …) and a usage error (an unknown flag, ``--top -1``, ``--format xml``): the line
  ``whowaits: error: …`` and exit 2 (``WhowaitsError.exit_code``);
* Ctrl-C: ``whowaits: interrupted``, exit 130; SIGTERM: ``whowaits: terminated``, exit 143
  (both unwind through ``finally`` blocks, so no temporary file is left behind);
* a closed stdout (``whowaits show … | head``): exit 141, silently;
* anything else is a bug: ``whowaits: internal error: …`` and exit 70 (``$WHOWAITS_DEBUG=1``
  shows the traceback instead).
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager


def _stopped_while_starting(signum, _frame) -> None:
    """Ctrl-C or SIGTERM while the console script is still importing: one line, nothing to undo."""
    os.write(2, b"whowaits: interrupted\n" if signum == signal.SIGINT else b"whowaits: terminated\n")
    os._exit(128 + signum)


def _is_console_script() -> bool:
    """This process is the ``whowaits`` console script itself: not an import of this package, nor
    a worker process that multiprocessing spawned from it (a spawned worker imports the script as
    ``__mp_main__``, with the script's ``sys.argv``, from ``multiprocessing.spawn``)."""
    return (os.path.basename(sys.argv[0] if sys.argv else "") == "whowaits"
            and "multiprocessing.spawn" not in sys.modules)


if _is_console_script():
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(_sig, _stopped_while_starting)

import typer

from profiler import settings

try:  # typer >= 0.20 carries its own copy of click
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
except ImportError:  # pragma: no cover - older typer on click
    from click.exceptions import ClickException, NoArgsIsHelpError

from profiler.cli._app import app
from profiler.errors import WhowaitsError

# Command modules register themselves on import (order = order in --help).
from profiler.cli import show as _show  # noqa: F401,E402
from profiler.cli import timeline as _timeline  # noqa: F401,E402
from profiler.cli import compare as _compare  # noqa: F401,E402
from profiler.cli import profile as _profile  # noqa: F401,E402
from profiler.cli import kernels as _kernels  # noqa: F401,E402
from profiler.cli import roles as _roles  # noqa: F401,E402
from profiler.cli import trace as _trace  # noqa: F401,E402
from profiler.cli import check as _check  # noqa: F401,E402
from profiler.cli import sweep as _sweep  # noqa: F401,E402
from profiler.cli import env as _env  # noqa: F401,E402

PROG = "whowaits"
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug, not bad input


class Stopped(BaseException):
    """Raised by the SIGINT/SIGTERM handlers of :func:`run`. Not a ``KeyboardInterrupt``: typer
    turns those into a silent exit 130, and library code that catches ``Exception`` lets this
    through, so ``finally`` blocks (temporary files) run on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOPPING: list[int] = []


def _stop(signum, _frame) -> None:
    if _STOPPING:  # a second signal (the group's and the supervisor's copy) while unwinding
        return
    _STOPPING.append(signum)
    raise Stopped(signum)


def _unraisable(hook):
    """``sys.unraisablehook`` that keeps quiet about a :class:`Stopped` raised where Python cannot
    propagate it (a ``__del__``, a weakref callback): :func:`_signals` still stops the command."""

    def quiet(u) -> None:
        if isinstance(u.exc_value, Stopped):
            return
        hook(u)

    return quiet


@contextmanager
def _signals():
    """SIGINT and SIGTERM raise :class:`Stopped` while the block runs (main thread only). A stop raised
    where Python swallows exceptions (a finalizer printing "Exception ignored") is not lost: the block's
    end raises it again, so the command never completes with exit 0 after a signal."""
    try:
        saved = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave the handlers alone
        yield
        return
    _STOPPING.clear()
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    try:
        yield
        if _STOPPING:
            raise Stopped(_STOPPING[0])
    except Stopped:
        # on the way out: further copies of the signal (the process group's and the supervisor's)
        # are ignored, so none can interrupt the one line said about the first
        for s in saved:
            signal.signal(s, signal.SIG_IGN)
        raise
    except BaseException as err:
        if _STOPPING and not isinstance(err, SystemExit):
            # a library turned the stop into its own error (DuckDB: "RuntimeError: Query interrupted"): still
            # the stop, said as such
            for s in saved:
                signal.signal(s, signal.SIG_IGN)
            raise Stopped(_STOPPING[0]) from None
        for s, h in saved.items():
            signal.signal(s, h)
        raise
    else:
        for s, h in saved.items():
            signal.signal(s, h)
    finally:
        sys.unraisablehook = hook


def _say(line: str) -> None:
    """One line on stderr, whatever it holds (a message may quote bytes of a corrupt report)."""
    text = " ".join(line.split()) + "\n"
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except UnicodeEncodeError:
        sys.stderr.write(text.encode("ascii", "backslashreplace").decode("ascii"))
    except (OSError, ValueError):  # stderr closed
        pass


def _usage_line(err: ClickException) -> str:
    msg = err.format_message()
    ctx = getattr(err, "ctx", None)
    where = ctx.command_path if ctx is not None else PROG
    return f"{msg} (see {where} --help)"


def run(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit code; every failure
    is turned into one stderr line as the module docstring says."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        with _signals():
            rv = app(args=args, prog_name=PROG, standalone_mode=False)
    except WhowaitsError as err:
        _say(f"{PROG}: error: {err}")
        return err.exit_code
    except NoArgsIsHelpError as err:
        typer.echo(err.format_message())  # `whowaits` alone: the help, on stdout
        return 0
    except ClickException as err:
        _say(f"{PROG}: error: {_usage_line(err)}")
        return 2
    except (KeyboardInterrupt, typer.Abort):
        _say(f"{PROG}: interrupted")
        return 130
    except Stopped as err:
        if err.signum == signal.SIGINT:
            _say(f"{PROG}: interrupted")
            return 130
        _say(f"{PROG}: terminated")
        return 128 + err.signum
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except Exception as err:  # noqa: BLE001 - the last guard: a bug, said in one line
        if settings.flag("WHOWAITS_DEBUG"):
            raise
        where = err.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        loc = f" at {os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno}" if where else ""
        _say(f"{PROG}: internal error: {type(err).__name__}: {err}{loc} "
             f"(a bug in whowaits; WHOWAITS_DEBUG=1 shows the traceback)")
        return EXIT_INTERNAL
    return rv if isinstance(rv, int) else 0


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


_CRASHES = {signal.SIGSEGV: "Segmentation fault", signal.SIGBUS: "Bus error", signal.SIGABRT: "Aborted",
            signal.SIGILL: "Illegal instruction", signal.SIGFPE: "Floating point exception"}


def _note_fd_on_import(fd: int) -> None:
    """Give :mod:`profiler.report` the pipe it names each report on (``NATIVE_NOTE_FD``) when something
    imports it, not before: it imports pandas and numpy (~0.4 s idle, over 1 s on a loaded machine), which
    ``--help``, ``kernels list`` or a usage error never need."""
    mod = sys.modules.get("profiler.report")
    if mod is not None:
        mod.NATIVE_NOTE_FD = fd
        return
    import importlib.abc  # noqa: PLC0415
    import importlib.machinery  # noqa: PLC0415

    class _SetFd(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "profiler.report":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                module.NATIVE_NOTE_FD = fd

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _SetFd())


def _supervised() -> int | None:
    """Run the CLI in a forked child and turn a native crash of it into one stderr line.

    ncu_report is native code: some damaged reports make it crash the process (a SIGSEGV inside
    ``IAction.source_files()`` was found by tests/test_fuzz.py), which no Python handler can
    catch. So the console script forks before anything has loaded ncu_report (so the fork is
    safe): the child runs :func:`run`; this parent only waits, forwards SIGINT/SIGTERM to the
    child (which handles each once), and exits with the child's code, or, when the child was
    killed by a crash signal, says so in one line (naming the report being read, which
    :mod:`profiler.report` writes to a pipe before it calls into ncu_report) and exits 2.
    Returns None where fork is unavailable (the caller then runs the CLI itself);
    ``$WHOWAITS_NO_SUPERVISOR=1`` skips it.
    """
    if settings.flag("WHOWAITS_NO_SUPERVISOR") or not hasattr(os, "fork") or "ncu_report" in sys.modules:
        return None

    stops = (signal.SIGINT, signal.SIGTERM)
    # blocked (held pending, not lost) until each side has its handlers: a signal in between is then
    # delivered to the child's handler or forwarded to it, never ignored
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        return None
    if pid == 0:  # the child: the CLI itself; it ends here, never back in the caller's stack
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        os.close(rfd)
        _note_fd_on_import(wfd)
        code = _finish(run())
        # A caller that embeds main() (a test catching SystemExit) would go on running its own code in this
        # child while the parent waits for it: exit here, after the atexit handlers a normal exit runs.
        import atexit  # noqa: PLC0415

        atexit._run_exitfuncs()
        _finish(code)
        os._exit(code)
    os.close(wfd)

    def forward(signum, _frame) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for sig in stops:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    with os.fdopen(rfd, "rb") as f:
        notes = f.read().decode("utf-8", "replace").splitlines()
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    if sig in _CRASHES:
        what = f"{notes[-1]}: corrupt Nsight Compute report" if notes else "a corrupt Nsight Compute report"
        _say(f"{PROG}: error: {what} (ncu_report crashed reading it: {_CRASHES[sig]}); "
             "re-copy or re-profile it")
        return 2
    _say(f"{PROG}: " + {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}.get(sig, f"killed by signal {sig}"))
    return 128 + sig


def _finish(code: int) -> int:
    """Flush stdout (EPIPE: silently, exit 141) and give the exit code."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = code or 141
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return code


def main() -> None:
    """Console-script entry point: :func:`run`, supervised (see :func:`_supervised`)."""
    code = _supervised()
    if code is None:
        code = _finish(run())
    sys.exit(code)
