"""The console script ``whowaits``: replays a read-only command's stored output before loading the CLI.

``whowaits show REPORT --format json``, ``diff A B --format json`` and ``migration --format json`` are pure
functions of what they read. Loading the CLI alone (typer, rich) costs ~0.2-0.3 s and the
analyses another second (pandas, pyarrow, ncu_report); when nothing they read has changed, asking again
should cost neither. So :func:`main` looks the command line up first, importing only the standard library:

* the key hashes the command line as typed, the current folder, the ``WHOWAITS_*`` environment (not
  the cache folder), whowaits' code fingerprint (every ``*.py`` of the package and every file under
  ``profiler/data/``), and the *contents* (sha256, never mtimes) of every file the command can read:
  each argument that names a file (a report and its ``.json`` sidecar) and, for ``diff``/``migration``,
  every ``*.ncu-rep``/``*.json`` of the reports folder's version folders (``--reports``, else
  :func:`profiler.paths.reports_dir`) and of the folders named by the other arguments beside it
  (``<reports>/../*/<name>/``: a version under another GPU);
* a hit writes the stored stdout and stderr back and exits 0; nothing else is imported;
* a miss runs :func:`profiler.cli.main` with file descriptors 1 and 2 on temporary files (its supervisor forks),
  passes what it wrote on, and stores it only when
  the command exited 0 (an error is never replayed).

Anything else (tables, csv, ``--html``, ``--help``, a series file, ``--from-store``, other commands) goes
straight to the CLI. Entries live
in ``<cache>/results/`` (:func:`profiler.paths.cache_dir`), written atomically; an unreadable entry is a
miss. ``WHOWAITS_NO_RESULT_CACHE=1`` turns the replay off.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from profiler import settings

#: commands whose ``--format json`` output is replayed
COMMANDS = ("show", "diff", "migration")
#: options that make a command write a file or read inputs this key cannot see (a series file's reports,
#: the DuckDB store): never replayed
_NOT_REPLAYED = ("--html", "--series", "--from-store", "--store")
#: bump to drop every stored entry
LAYOUT = 1
_SUFFIXES = (".ncu-rep", ".json")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 over the package's ``*.py`` files and every data file (names and bytes)."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256(str(LAYOUT).encode())
    files = sorted(p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)
    files += sorted(p for p in (pkg / "data").rglob("*") if p.is_file())
    for p in files:
        h.update(str(p.relative_to(pkg)).encode() + b"\0")
        h.update(p.read_bytes())
    return h.hexdigest()


def _file_digest(h, p: Path) -> None:
    try:
        with open(p, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        digest = "unreadable"
    h.update(f"{p.resolve()}\0{digest}\n".encode())


def _files(args: Iterable[str], reports: Path | None) -> list[Path]:
    found: list[Path] = []
    for a in args:
        p = Path(a)
        if p.is_file():
            found += [p, p.with_suffix(".json")] if p.suffix == ".ncu-rep" else [p]
        elif reports is not None and a and "/" not in a and os.sep not in a:
            found += [f for f in reports.parent.glob(f"*/{a}/*") if f.suffix in _SUFFIXES]
    if reports is not None and reports.is_dir():
        found += [f for f in reports.glob("*/*") if f.suffix in _SUFFIXES]
    return sorted({f for f in found if f.is_file()}, key=str)


def key(command: str, args: list[str], reports: Path | None) -> str:
    """The entry's name: sha256 of the command, its arguments, the folder, the environment, the files
    it can read and the code (see the module docstring)."""
    h = hashlib.sha256()
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("WHOWAITS_") and k not in ("WHOWAITS_CACHE_DIR", "WHOWAITS_PROCESSES"))
    head = [LAYOUT, command, list(args), os.getcwd(), str(reports.resolve()) if reports else None, env,
            code_fingerprint()]
    h.update(json.dumps(head).encode())
    for f in _files(args, reports):
        _file_digest(h, f)
    return h.hexdigest()


def _path(k: str) -> Path:
    from profiler.paths import cache_dir  # noqa: PLC0415

    return cache_dir() / "results" / f"{k}.json"


def _option(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if n.startswith("--") and a.startswith(n + "="):
                return a[len(n) + 1:]
            if not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                return a[len(n):]
    return None


def replayable(argv: list[str]) -> bool:
    """Whether ``argv`` (without the program name) is a command whose output is stored: one of
    :data:`COMMANDS` with ``--format json``, no ``--help`` and none of :data:`_NOT_REPLAYED` nor a ``.toml``
    series file."""
    if not argv or argv[0] not in COMMANDS or settings.flag("WHOWAITS_NO_RESULT_CACHE"):
        return False
    if any(a in ("--help", "-h") or a.split("=")[0] in _NOT_REPLAYED or a.endswith(".toml") for a in argv):
        return False  # help, a file written, or inputs named inside another file (series, store)
    return _option(argv[1:], "--format", "-f") == "json"


def command_key(argv: list[str]) -> str:
    """The entry name of ``argv``: see the module docstring."""
    reports = None
    if argv[0] != "show":
        from profiler.paths import reports_dir  # noqa: PLC0415

        reports = reports_dir(root=_option(argv[1:], "--reports"))
    return key(argv[0], argv[1:], reports)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: a stored result when there is one, else :func:`profiler.cli.main`."""
    argv = sys.argv[1:] if argv is None else argv
    if not replayable(argv):
        from profiler.cli import main as cli_main  # noqa: PLC0415

        cli_main()
        return
    path = _path(command_key(argv))
    try:
        entry = json.loads(path.read_text())
        out, err = entry["stdout"], entry["stderr"]
        if isinstance(out, str) and isinstance(err, str):
            _write(err.encode(), out.encode())
            return
    except (OSError, ValueError, KeyError, TypeError):
        pass  # a miss, or a damaged entry: computed again and rewritten
    code, out, err = _captured()
    if code in (0, None):
        try:
            from profiler.io import write_atomic  # noqa: PLC0415

            write_atomic(path, json.dumps({"stdout": out, "stderr": err}))
        except OSError:
            pass  # a read-only cache folder costs speed, not correctness
    if code not in (0, None):
        sys.exit(code)


def _captured() -> tuple[object, str, str]:
    """Run :func:`profiler.cli.main` with file descriptors 1 and 2 on temporary files (the CLI runs in a
    forked child that inherits them: see its supervisor), then pass what it wrote on; returns the exit code
    and the text. In a forked child the exit goes straight up, untouched."""
    import tempfile  # noqa: PLC0415

    from profiler.cli import main as cli_main  # noqa: PLC0415

    me = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    files = (tempfile.TemporaryFile(), tempfile.TemporaryFile())
    saved = (os.dup(1), os.dup(2))
    os.dup2(files[0].fileno(), 1)
    os.dup2(files[1].fileno(), 2)
    code: object = 0
    try:
        cli_main()
    except SystemExit as done:
        if os.getpid() != me:
            raise  # the supervisor's child: its exit, not ours
        code = done.code
    finally:
        if os.getpid() == me:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    data = []
    for f in files:
        f.seek(0)
        data.append(f.read())
        f.close()
    _write(data[1], data[0])
    return code, data[0].decode("utf-8", "replace"), data[1].decode("utf-8", "replace")


def _write(err: bytes, out: bytes) -> None:
    """stderr, then stdout; a closed stdout (``… | head``) ends it silently with exit 141, as the CLI does."""
    try:
        sys.stderr.buffer.write(err)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        sys.exit(141)


if __name__ == "__main__":
    main()
