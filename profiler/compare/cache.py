"""A cache of report summaries, so that comparing versions a second time costs file hashes, not
analyses.

Two layers, both keyed by what the summary depends on, so a stale entry is never served:

* in this process: ``(real path, size, mtime_ns, kernel regex, fingerprint)`` -> summaries;
* on disk: ``$WHOWAITS_CACHE_DIR/summaries/<report sha256>.<fingerprint>.<kernel hash>.json``
  (the cache folder of :func:`profiler.report.cache_dir`), written atomically.

The *fingerprint* hashes the analysis code (``profiler/analyze/*.py``, ``profiler/report.py``) and
the data files' version (:func:`profiler.metrics.data_version`): change either and every entry
misses. Callers get deep copies, so mutating a summary cannot poison the cache.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from profiler.provenance import sha256_file

_MEMO: dict = {}


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """Hash of the analysis code and data-file versions that produce a summary."""
    from profiler import metrics  # noqa: PLC0415

    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(metrics.data_version().encode())
    extra = [pkg / "report.py", pkg / "metrics.py", pkg / "data" / "producers.toml"]
    for p in sorted((pkg / "analyze").glob("*.py")) + extra:
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]



def _disk_path(sha: str, kernel: str | None) -> Path:
    from profiler.report import cache_dir  # noqa: PLC0415

    k = hashlib.sha256((kernel if kernel is not None else "\0all").encode()).hexdigest()[:12]
    return cache_dir() / "summaries" / f"{sha}.{fingerprint()}.{k}.json"


def _read(path: Path):
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # unreadable entry: a miss, rebuilt by the caller
    return data if isinstance(data, list) else None


def _write(path: Path, launches: list) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(launches, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache folder costs speed, not correctness


def summaries(path: str | os.PathLike, kernel: str | None = None) -> list[dict]:
    """:func:`profiler.analyze.summarize` of ``path`` (launches matching ``kernel``), cached."""
    p = Path(path)
    try:
        st = p.stat()
        memo_key = (str(p.resolve()), st.st_size, st.st_mtime_ns, kernel, fingerprint())
    except OSError:
        memo_key = None  # let summarize say what is wrong with the path
    if memo_key is not None and memo_key in _MEMO:
        return copy.deepcopy(_MEMO[memo_key])
    launches = None
    disk = None
    if memo_key is not None:
        disk = _disk_path(sha256_file(p), kernel)
        launches = _read(disk)
    if launches is None:
        from profiler.analyze import summarize  # noqa: PLC0415

        launches = summarize(str(p), kernel=kernel)
        if disk is not None and launches:
            _write(disk, launches)
    if memo_key is not None:
        _MEMO[memo_key] = launches
    return copy.deepcopy(launches)


def clear_memo() -> None:
    """Forget the in-process layer (the disk layer stays)."""
    _MEMO.clear()
