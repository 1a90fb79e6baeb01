"""Cache entries that can be trusted: keyed on content, sealed with a digest, discarded when damaged.

Both of whowaits' caches (the parsed frames of :mod:`profiler.report` and the summaries of
:mod:`profiler.compare.cache`) store one file per entry under :func:`profiler.report.cache_dir`:

* **Key**: the report's sha256 plus a :func:`fingerprint` of everything that produced the entry:
  the bytes of the code and data files named (a file edited without any version bump changes
  the key) and the versions of the libraries that decoded the report or wrote the entry.
* **Seal**: an entry is ``MAGIC + sha256(payload) + payload``. :func:`read` returns the payload
  only when the digest matches, so a flipped byte anywhere in an entry (even a digit of a JSON
  number, which would still decode) is caught; a damaged entry is deleted and the caller
  rebuilds it. Decoding and validating the payload is the caller's job: on any failure there it
  calls :func:`discard` and rebuilds, never trusting the entry.
* **Writes** are atomic (a temporary file in the same folder, then a rename), so readers never
  see half an entry; a read-only or full cache folder costs speed, not correctness.
"""

from __future__ import annotations

import hashlib
import os
import stat
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from profiler.io import write_atomic

__all__ = ["MAGIC", "fingerprint", "seal", "unseal", "read", "write", "discard"]

MAGIC = b"WHOWAITS-CACHE-1\n"
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


def seal(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + payload


def unseal(blob: bytes) -> bytes | None:
    """The payload of a sealed entry, or None when the magic or the digest does not match."""
    head = len(MAGIC) + _DIGEST
    if len(blob) < head or not blob.startswith(MAGIC):
        return None
    payload = blob[head:]
    if hashlib.sha256(payload).digest() != blob[len(MAGIC):head]:
        return None
    return payload


def read(path: Path) -> bytes | None:
    """The verified payload of the entry at ``path``; None when there is none, or when it is not
    a regular file or fails its seal (then it is deleted, to be rebuilt)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    payload = unseal(blob)
    if payload is None:
        discard(path)
    return payload


def write(path: Path, payload: bytes) -> None:
    """Seal and write ``payload`` atomically; an unwritable cache folder is ignored."""
    try:
        write_atomic(path, seal(payload))
    except OSError:
        pass


def discard(path: Path) -> None:
    """Remove a damaged entry (it is rebuilt by whoever asked for it)."""
    try:
        os.unlink(path)
    except OSError:
        pass
