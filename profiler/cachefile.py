"""Cache entries that can be trusted: keyed on content, sealed with a digest, discarded when damaged.

Both of whowaits' caches (the parsed frames of :mod:`profiler.report` and the summaries of
:mod:`profiler.compare.cache`) store one file per entry under :func:`profiler.report.cache_dir`:

* **Key**: the report's sha256 plus a :func:`fingerprint` of everything that produced the entry:
  the bytes of the code and data files named (a file edited without any version bump changes
  the key) and the versions of the libraries that decoded the report or wrote the entry.
* **Seal**: an entry is ``MAGIC + sha256(key + payload) + payload``, where the key is the entry's
  file name (which holds the report's sha256 and the fingerprint) unless the caller gives another.
  :func:`read` returns the payload only when the digest matches, so a flipped byte anywhere in an
  entry (even a digit of a JSON number, which would still decode) is caught, and so is a valid entry
  of *another* key copied, renamed or linked into place (another report's summaries under this
  report's name). A damaged or foreign entry is deleted and the caller rebuilds it. Decoding and
  validating the payload is the caller's job: on any failure there it calls :func:`discard` and
  rebuilds, never trusting the entry.
* **File type**: an entry is opened without following a link and without blocking
  (``O_NOFOLLOW | O_NONBLOCK``: a FIFO planted in its place cannot hang the reader), then checked
  to be a regular file; anything else at its path (a link, a FIFO, a folder) is removed.
* **Writes** are atomic (a temporary file in the same folder, then a rename), so readers never
  see half an entry; a read-only or full cache folder costs speed, not correctness.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from functools import lru_cache
from pathlib import Path

from profiler.io import write_atomic

__all__ = ["MAGIC", "fingerprint", "seal", "unseal", "read", "read_regular", "write", "discard"]

MAGIC = b"WHOWAITS-CACHE-2\n"
_DIGEST = 32
PACKAGE = Path(__file__).resolve().parent


def _files(spec: str) -> list[Path]:
    """``spec`` relative to the package: a file, or a folder (every file below it, recursively,
    but no ``__pycache__``)."""
    p = PACKAGE / spec
    if p.is_dir():
        return sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts
                      and f.suffix != ".pyc")
    return [p] if p.is_file() else []


def _dist_version(name: str) -> str:
    from importlib import metadata  # noqa: PLC0415 - only for a fingerprint: the replay cache never needs it

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


@lru_cache(maxsize=None)
def fingerprint(files: tuple[str, ...], dists: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> str:
    """16 hex digits over the bytes (and package-relative names) of ``files`` (files or folders
    relative to the ``profiler`` package; ``exclude`` drops folders/files from them) and the
    installed versions of the distributions ``dists``. Computed once per process."""
    h = hashlib.sha256()
    seen: set[Path] = set()
    skip = [PACKAGE / e for e in exclude]
    for spec in files:
        for f in _files(spec):
            if f in seen or any(f == s or s in f.parents for s in skip):
                continue
            seen.add(f)
            h.update(str(f.relative_to(PACKAGE)).encode() + b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    for d in dists:
        h.update(f"{d}={_dist_version(d)}\0".encode())
    return h.hexdigest()[:16]


def _digest(payload: bytes, key: str | bytes) -> bytes:
    k = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else key
    h = hashlib.sha256(len(k).to_bytes(4, "big") + k)
    h.update(payload)
    return h.digest()


def seal(payload: bytes, key: str | bytes = b"") -> bytes:
    """``payload`` sealed for ``key``: only :func:`unseal` with the same key gives it back."""
    return MAGIC + _digest(payload, key) + payload


def unseal(blob: bytes, key: str | bytes = b"") -> bytes | None:
    """The payload of an entry sealed for ``key``, or None when the magic or the digest does not match
    (a damaged entry, or one sealed for another key)."""
    head = len(MAGIC) + _DIGEST
    if len(blob) < head or not blob.startswith(MAGIC):
        return None
    payload = blob[head:]
    if _digest(payload, key) != blob[len(MAGIC):head]:
        return None
    return payload


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (opened without following a link and without
    blocking on a FIFO); None when there is nothing there. Anything else at ``path`` (a link, a FIFO,
    a socket, a folder) is removed and None returned."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError:  # a link (ELOOP), a folder opened for reading fails on read instead; anything else
        discard(path)
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fd = -1
            discard(path)
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read()
    except OSError:
        discard(path)
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def read(path: Path, key: str | bytes | None = None) -> bytes | None:
    """The verified payload of the entry at ``path`` for ``key`` (default: the file's name); None when
    there is none, or when it is not a regular file or fails its seal (then it is deleted, to be
    rebuilt)."""
    path = Path(path)
    blob = read_regular(path)
    if blob is None:
        return None
    payload = unseal(blob, path.name if key is None else key)
    if payload is None:
        discard(path)
    return payload


def write(path: Path, payload: bytes, key: str | bytes | None = None) -> None:
    """Seal ``payload`` for ``key`` (default: the file's name) and write it atomically; an unwritable
    cache folder (or a folder in the entry's place that cannot be removed) is ignored."""
    path = Path(path)
    try:
        if path.is_dir() and not path.is_symlink():
            discard(path)
        write_atomic(path, seal(payload, path.name if key is None else key))
    except OSError:
        pass


def discard(path: Path) -> None:
    """Remove a damaged or foreign entry, whatever it is (a file, a link, a FIFO, a folder): it is
    rebuilt by whoever asked for it."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass
