"""One way to write a file: atomically (a temporary file in the same folder, then ``os.replace``).

A reader never sees a half-written file and a failed or interrupted write leaves nothing behind: the
temporary file is removed on any exception (KeyboardInterrupt included) before it propagates. Every
writer of reports, sidecars, caches and HTML in :mod:`profiler` goes through :func:`write_atomic`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Union

Payload = Union[str, bytes, Callable[[Path], None]]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike, data: Payload, *, mkdir: bool = True,
                 mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through ``.<name>.<random>.tmp`` in the same folder and a rename.

    ``data`` is text (written as UTF-8), bytes, or a function that writes the temporary file given its
    path (e.g. ``lambda p: frame.to_parquet(p)``). The file gets ``mode`` (default: 0o666 less the
    umask, as ``open`` would give; ``mkstemp`` alone makes 0600). ``mkdir`` creates missing parents.
    Raises what the write raised (``OSError`` …), with no temporary file left behind.
    """
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        if callable(data):
            os.close(fd)
            data(tmp)
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, (0o666 & ~_umask()) if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | os.PathLike, data, *, indent: int | None = 2, **kw) -> Path:
    """``data`` as JSON (indented, newline-terminated by default) through :func:`write_atomic`."""
    text = json.dumps(data, indent=indent)
    return write_atomic(path, text + "\n" if indent is not None else text, **kw)


__all__ = ["write_atomic", "write_json_atomic"]
