"""A cache of report summaries, so that comparing versions a second time costs file hashes, not
analyses.

Two layers, both keyed by what the summary depends on, so a stale entry is never served:

* in this process: ``(report sha256, kernel regex, fingerprint)`` -> summaries (hashing the
  committed reports again costs ~20 ms: cheaper than trusting a modification time);
* on disk: ``$WHOWAITS_CACHE_DIR/summaries/<report sha256>.<fingerprint>.<kernel hash>.json``
  (the cache folder of :func:`profiler.report.cache_dir`), sealed and written atomically by
  :mod:`profiler.cachefile`.

The *fingerprint* (:func:`fingerprint`) hashes the bytes of every module and data file of the
``profiler`` package that can take part in a summary (all of it but the CLI and the HTML/plot
renderers) and the versions of ``ncu-report``, pandas, numpy and pyarrow: edit any of them and
every entry misses; nothing is bumped by hand. An entry that fails its seal, does not decode or
does not pass :func:`profiler.schema.validate_summaries` is deleted and rebuilt, never used. Callers get
deep copies, so mutating a summary cannot poison the cache. A report path is checked
(:func:`profiler.report.check_file`: a directory, FIFO or device is refused) before it is hashed.

:func:`summaries_many` summarises several reports missing from both layers in parallel: this
process takes the largest reports first while a :class:`concurrent.futures.ProcessPoolExecutor`
(``spawn`` context: ``ncu_report`` does not survive ``fork``) of ``cpus - 1`` workers takes the
smallest; each worker pays ~0.3 s of start-up and ~0.3 s of ``ncu_report`` initialisation, so the
pool is used only from :data:`PARALLEL_MIN` missing reports and two CPUs on. Workers return the
same summaries :func:`summaries` computes (and write the same disk entries); a report a worker
fails on is summarised again here, so errors are raised exactly as the serial path raises them.
``$WHOWAITS_PROCESSES`` caps the processes (1: serial).

Workers ignore SIGINT (Ctrl-C reaches the whole process group: this process stops them) and
die quietly on SIGTERM; they are started with SIGINT ignored, so an interrupt while one boots
cannot print a traceback from it either. When this process is interrupted it terminates them.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import threading
from collections import deque
from pathlib import Path

from profiler import cachefile, sass_worker, settings
from profiler.provenance import sha256_file

_MEMO: dict = {}

#: fewest reports missing from the cache for which :func:`summaries_many` starts worker processes
PARALLEL_MIN = 3

#: what a summary entry is derived from (package-relative files/folders), what is left out of it,
#: and the distributions whose versions are part of the key
_SUMMARY_FROM = (("",), ("ncu-report", "pandas", "numpy", "pyarrow"), ("cli", "html.py", "plots.py"))

def fingerprint() -> str:
    """Hash of the code, data files and library versions that produce a summary."""
    files, dists, exclude = _SUMMARY_FROM
    return cachefile.fingerprint(files, dists, exclude)


def _disk_path(sha: str, kernel: str | None) -> Path:
    from profiler.report import cache_dir  # noqa: PLC0415

    k = hashlib.sha256((kernel if kernel is not None else "\0all").encode()).hexdigest()[:12]
    return cache_dir() / "summaries" / f"{sha}.{fingerprint()}.{k}.json"


def _valid(data) -> bool:
    """Whether ``data`` is a non-empty list of summaries of :mod:`profiler.schema`'s type."""
    from profiler.schema import SchemaError, validate_summaries  # noqa: PLC0415

    try:
        validate_summaries(data)
    except SchemaError:
        return False
    return bool(data)


def _read(path: Path):
    """The summaries stored at ``path``, or None (no entry; a damaged one is deleted)."""
    payload = cachefile.read(path)
    if payload is None:
        return None
    try:
        data = json.loads(payload)
    except ValueError:  # UnicodeDecodeError included
        data = None
    if not _valid(data):
        cachefile.discard(path)
        return None
    return data


def _write(path: Path, launches: list) -> None:
    cachefile.write(path, json.dumps(launches).encode())


def _sha(p: Path, shas: dict | None) -> str:
    """sha256 of ``p``; ``shas`` (one :func:`summaries_many` call's) keeps it for that call, keyed
    by the file's identity and modification time."""
    if shas is None:
        return sha256_file(p)
    st = p.stat()
    key = (os.path.realpath(p), st.st_size, st.st_mtime_ns, st.st_ino)
    sha = shas.get(key)
    if sha is None:
        sha = shas[key] = sha256_file(p)
    return sha


def summaries(path: str | os.PathLike, kernel: str | None = None, _shas: dict | None = None
              ) -> list[dict]:
    """:func:`profiler.analyze.summarize` of ``path`` (launches matching ``kernel``), cached."""
    from profiler.report import check_file  # noqa: PLC0415

    p = Path(path)
    check_file(p)  # before hashing: a FIFO or /dev/zero would never end
    sha = _sha(p, _shas)
    key = (sha, kernel, fingerprint())
    launches = _MEMO.get(key)
    if launches is None:
        disk = _disk_path(sha, kernel)
        launches = _read(disk)
        if launches is None:
            from profiler.analyze import summarize  # noqa: PLC0415

            launches = summarize(str(p), kernel=kernel)
            if launches:
                _write(disk, launches)
        _MEMO[key] = launches
    out = copy.deepcopy(launches)
    for s in out:  # the entry may come from another path with the same bytes
        s["report"] = str(path)
    return out


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _missing(p: Path, kernel: str | None, shas: dict) -> str | None:
    """The sha256 of ``p`` when it is in neither cache layer, else None (a path that is no
    report counts as present: the serial pass reports it, in order)."""
    from profiler.errors import WhowaitsError  # noqa: PLC0415
    from profiler.report import check_file  # noqa: PLC0415

    try:
        check_file(p)
        sha = _sha(p, shas)
    except (WhowaitsError, OSError):
        return None
    if (sha, kernel, fingerprint()) in _MEMO or _disk_path(sha, kernel).is_file():
        return None
    return sha


def summaries_many(items: list[tuple[str | os.PathLike, str | None]], *,
                   processes: int | None = None) -> list[list[dict]]:
    """:func:`summaries` of each ``(path, kernel)``, in order; the ones in neither cache layer
    are first summarised in parallel (see the module docstring) when there are at least
    :data:`PARALLEL_MIN` of them. ``processes``: how many processes in all, this one included
    (default: ``$WHOWAITS_PROCESSES``, else the CPUs this process may run on); 1 is the serial
    path."""
    if processes is None:
        try:
            processes = settings.integer("WHOWAITS_PROCESSES") or 0
        except ValueError:
            processes = 0
        processes = processes if processes > 0 else _cpus()
    n = max(1, int(processes))
    shas: dict = {}
    if n >= 2 and len(items) >= PARALLEL_MIN:
        todo: list[tuple[Path, str | None]] = []
        seen = set()
        for path, kernel in items:
            p = Path(path)
            sha = _missing(p, kernel, shas)
            if sha is not None and (sha, kernel) not in seen:
                seen.add((sha, kernel))
                todo.append((p, kernel))
        if len(todo) >= PARALLEL_MIN:
            _fill_parallel(todo, min(n, len(todo)), shas)
    return [summaries(path, kernel, shas) for path, kernel in items]


# --- the worker pool ----------------------------------------------------------------------------


def _fill_parallel(todo: list[tuple[Path, str | None]], processes: int, shas: dict) -> int:
    """Put the summaries of ``todo`` into the in-process layer, using ``processes - 1`` worker
    processes beside this one; returns how many of them the workers made."""
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

    # Largest reports first: this process takes from the front, the workers (which start late,
    # and pay the start-up with their first job) from the back, so the last jobs are small ones.
    jobs = deque(sorted(todo, key=_size, reverse=True))
    lock = threading.Lock()
    results: dict = {}
    nworkers = processes - 1
    pool = ProcessPoolExecutor(max_workers=nworkers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker)

    def take_last():
        with lock:
            return jobs.pop() if jobs else None

    def give_back(job) -> None:
        with lock:
            jobs.append(job)

    def feed(future, job) -> None:
        """Wait for ``job`` in a worker, then send that worker the next one, until none is left
        (a job a dead worker leaves is given back to the queue)."""
        while job is not None:
            try:
                launches = future.result()
            except BaseException:  # noqa: BLE001 - the pool broke or was stopped
                give_back(job)
                return
            if launches is not None:
                with lock:
                    results[job] = launches
            job = take_last()
            if job is not None:
                try:
                    future = pool.submit(_work, str(job[0]), job[1])
                except RuntimeError:  # shut down or broken
                    give_back(job)
                    return

    threads = []
    try:
        # The first jobs are submitted from this thread with SIGINT ignored: that starts the
        # worker processes (on submit) with SIGINT ignored from their first instruction, so a
        # Ctrl-C while they boot cannot print a traceback. (A Ctrl-C in those few milliseconds
        # is lost; one a moment later is not.)
        with _sigint_ignored(), _main_module_hidden():
            first = []
            for _ in range(nworkers):
                job = take_last()
                if job is None:
                    break
                first.append((pool.submit(_work, str(job[0]), job[1]), job))
        threads = [threading.Thread(target=feed, args=f, daemon=True) for f in first]
        for t in threads:
            t.start()
        while True:  # this process works through the queue too, largest first (alone: see _init_worker)
            with lock:
                job = jobs.popleft() if jobs else None
            if job is None:
                break
            try:
                with sass_worker.off():
                    summaries(*job, shas)
            except Exception:  # noqa: BLE001 - raised again, in order, by the caller's pass
                pass
        for t in threads:
            t.join()
    except BaseException:
        _stop(pool)
        raise
    # The workers exit on their own (interpreter and ncu_report teardown, ~0.1 s); that is not
    # waited for here but at this process's exit.
    pool.shutdown(wait=False)
    for (p, kernel), launches in results.items():
        try:
            _MEMO[(_sha(p, shas), kernel, fingerprint())] = launches
        except OSError:
            pass
    # a job a worker gave back (it died) after this process had emptied the queue is left to
    # the caller's serial pass
    return len(results)


def _stop(pool) -> None:
    """Stop at once: pending jobs cancelled, running workers terminated (SIGTERM: they die
    quietly)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        try:
            proc.terminate()
        except (OSError, ValueError, AttributeError):
            pass


class _sigint_ignored:
    """SIGINT ignored while the block runs (main thread only; elsewhere a no-op)."""

    def __enter__(self):
        try:
            self._saved = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread
            self._saved = None
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGINT, self._saved)


class _main_module_hidden:
    """A bare ``__main__`` while worker processes are started (spawn re-imports the parent's main
    module in each worker: for the ``whowaits`` console script that is the whole CLI, typer and
    pydantic included; the workers need only :func:`_work`, imported from this module).
    Measured 2026-12-01, cold ``whowaits migration --format json`` (empty cache), 3 interleaved
    pairs, load average 6.7-7.2: user CPU 5.50 s median without this (5.34-5.78), 5.21 s with it (5.04-5.83); wall 11.88 ->
    11.83 s (the saving is the worker's start-up, mostly hidden behind this process's own work)."""

    def __enter__(self):
        import sys  # noqa: PLC0415
        import types  # noqa: PLC0415

        self._saved = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        return self

    def __exit__(self, *exc) -> None:
        import sys  # noqa: PLC0415

        if self._saved is not None:
            sys.modules["__main__"] = self._saved


def _size(job: tuple[Path, str | None]) -> int:
    try:
        return job[0].stat().st_size
    except OSError:
        return 0


def _init_worker() -> None:
    """Initializer of a worker process: SIGINT ignored (the parent stops the workers), SIGTERM
    ends it without a word, and stdout goes to stderr (a stray print must not mix into the
    parent's JSON)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    settings.put("WHOWAITS_SASS_WORKER", "0")  # the pool keeps the CPUs busy: no disassembly worker each
    try:
        os.dup2(2, 1)
    except OSError:
        pass


def _work(path: str, kernel: str | None):
    """One job in a worker: the summaries (also written to the disk layer), or None on any
    failure (the caller's serial pass raises it, in order)."""
    try:
        return summaries(path, kernel)
    except Exception:  # noqa: BLE001
        return None


def clear_memo() -> None:
    """Forget the in-process layer (the disk layer stays)."""
    _MEMO.clear()
