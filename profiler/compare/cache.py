"""A cache of report summaries, so that comparing versions a second time costs file hashes, not
analyses.

Two layers, both keyed by what the summary depends on, so a stale entry is never served:

* in this process: ``(real path, size, mtime_ns, kernel regex, fingerprint)`` -> summaries;
* on disk: ``$WHOWAITS_CACHE_DIR/summaries/<report sha256>.<fingerprint>.<kernel hash>.json``
  (the cache folder of :func:`profiler.report.cache_dir`), written atomically.

The *fingerprint* hashes the analysis code (``profiler/analyze/*.py``, ``profiler/report.py``) and
the data files' version (:func:`profiler.metrics.data_version`): change either and every entry
misses. Callers get deep copies, so mutating a summary cannot poison the cache.

:func:`summaries_many` summarises several reports missing from both layers in parallel: this
process and ``cpus - 1`` worker processes (fresh interpreters: ``ncu_report`` does not survive
``fork``) each take the next report until none is left; each worker pays ~0.3 s of start-up and
~0.3 s of ``ncu_report`` initialisation, so it is used only from :data:`PARALLEL_MIN` missing
reports and two CPUs on. Workers return the same summaries :func:`summaries` computes (and write
the same disk entries); a report a worker fails on is summarised again here, so errors are raised
exactly as the serial path raises them. ``$WHOWAITS_PROCESSES`` caps the processes (1: serial).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
from collections import deque
from functools import lru_cache
from pathlib import Path

from profiler.io import write_atomic
from profiler.provenance import sha256_file

_MEMO: dict = {}

#: fewest reports missing from the cache for which :func:`summaries_many` starts worker processes
PARALLEL_MIN = 3


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """Hash of the analysis code and data-file versions that produce a summary."""
    from profiler import metrics  # noqa: PLC0415

    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(metrics.data_version().encode())
    extra = [pkg / "report.py", pkg / "metrics.py", pkg / "data" / "producers.toml", pkg / "data" / "sass.toml"]
    for p in sorted((pkg / "analyze").glob("*.py")) + sorted((pkg / "sass").glob("*.py")) + extra:
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
    """Write an entry atomically: a temporary file renamed over ``path``, removed on any failure
    (so a reader never sees a half-written entry, and none is left behind)."""
    try:
        write_atomic(path, json.dumps(launches))
    except OSError:
        pass  # a read-only cache folder costs speed, not correctness


def _memo_key(p: Path, kernel: str | None):
    try:
        st = p.stat()
        return (str(p.resolve()), st.st_size, st.st_mtime_ns, kernel, fingerprint()), st
    except OSError:
        return None, None  # let summarize say what is wrong with the path


def _sha(p: Path, st, shas: dict | None) -> str:
    """sha256 of ``p``; ``shas`` (one :func:`summaries_many` call's) keeps it for that call."""
    if shas is None:
        return sha256_file(p)
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    sha = shas.get(key)
    if sha is None:
        sha = shas[key] = sha256_file(p)
    return sha


def summaries(path: str | os.PathLike, kernel: str | None = None, _shas: dict | None = None
              ) -> list[dict]:
    """:func:`profiler.analyze.summarize` of ``path`` (launches matching ``kernel``), cached."""
    p = Path(path)
    memo_key, st = _memo_key(p, kernel)
    if memo_key is not None and memo_key in _MEMO:
        return copy.deepcopy(_MEMO[memo_key])
    launches = None
    disk = None
    if memo_key is not None:
        disk = _disk_path(_sha(p, st, _shas), kernel)
        launches = _read(disk)
    if launches is None:
        from profiler.analyze import summarize  # noqa: PLC0415

        launches = summarize(str(p), kernel=kernel)
        if disk is not None and launches:
            _write(disk, launches)
    if memo_key is not None:
        _MEMO[memo_key] = launches
    return copy.deepcopy(launches)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _missing(p: Path, kernel: str | None, shas: dict) -> bool:
    """Whether ``p`` is in neither cache layer (an unreadable disk entry counts as present: the
    serial path rebuilds it)."""
    memo_key, st = _memo_key(p, kernel)
    if memo_key is None:
        return False  # summarize reports the error, in order
    if memo_key in _MEMO:
        return False
    return not _disk_path(_sha(p, st, shas), kernel).is_file()


def summaries_many(items: list[tuple[str | os.PathLike, str | None]], *,
                   processes: int | None = None) -> list[list[dict]]:
    """:func:`summaries` of each ``(path, kernel)``, in order; the ones in neither cache layer
    are first summarised in parallel (see the module docstring) when there are at least
    :data:`PARALLEL_MIN` of them. ``processes``: how many processes in all, this one included
    (default: ``$WHOWAITS_PROCESSES``, else the CPUs this process may run on); 1 is the serial
    path."""
    if processes is None:
        try:
            processes = int(os.environ.get("WHOWAITS_PROCESSES", "0"))
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
            key = _memo_key(p, kernel)[0]
            if key is not None and key not in seen and _missing(p, kernel, shas):
                seen.add(key)
                todo.append((p, kernel))
        if len(todo) >= PARALLEL_MIN:
            _fill_parallel(todo, min(n, len(todo)), shas)
    return [summaries(path, kernel, shas) for path, kernel in items]


def _fill_parallel(todo: list[tuple[Path, str | None]], processes: int, shas: dict) -> None:
    """Put the summaries of ``todo`` into the in-process layer, using ``processes - 1`` worker
    processes beside this one; each process keeps ncu_report's disassembler on a CPU of its own
    (see :mod:`profiler.report`)."""
    from profiler import report  # noqa: PLC0415

    _reap()
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    # Largest reports first: this process takes from the front, the workers (which start late,
    # and pay the start-up with their first job) from the back, so the last jobs are small ones.
    jobs = deque(sorted(todo, key=_size, reverse=True))
    lock = threading.Lock()
    results: dict = {}

    def take():
        with lock:
            return jobs.popleft() if jobs else None

    def take_last():
        with lock:
            return jobs.pop() if jobs else None

    workers = []
    for i in range(1, processes):
        try:
            workers.append(_Worker(cpus[i % len(cpus)] if cpus else None))
        except OSError:
            break
    threads = [threading.Thread(target=w.serve, args=(take_last, jobs, lock, results), daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    previous = report._PREFERRED_CPU
    try:
        report._PREFERRED_CPU = cpus[0] if cpus else None
        while (job := take()) is not None:  # this process works through the queue too
            try:
                summaries(*job, shas)
            except Exception:  # noqa: BLE001 - raised again, in order, by the caller's pass
                pass
    finally:
        report._PREFERRED_CPU = previous
        for t in threads:
            t.join()
        for w in workers:
            w.close()
    for job, launches in results.items():
        key = _memo_key(*job)[0]
        if key is not None:
            _MEMO[key] = launches
    # a job a worker gave back (it died) after this process had emptied the queue is left to
    # the caller's serial pass


def _size(job: tuple[Path, str | None]) -> int:
    try:
        return job[0].stat().st_size
    except OSError:
        return 0


class _Worker:
    """A worker process (a fresh interpreter, not a fork: ncu_report does not survive fork) that
    summarises the reports it is sent, one at a time, through :func:`summaries` (so it writes the
    same disk entries), and sends back the summaries, pickled, or None when it failed."""

    def __init__(self, cpu: int | None):
        import subprocess  # noqa: PLC0415
        import sys  # noqa: PLC0415

        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        code = f"from profiler.compare.cache import _worker_main; _worker_main({cpu!r})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)

    def serve(self, take, jobs, lock, results) -> None:
        import pickle  # noqa: PLC0415

        while (job := take()) is not None:
            try:
                pickle.dump((str(job[0]), job[1]), self.proc.stdin)
                self.proc.stdin.flush()
                launches = pickle.load(self.proc.stdout)
            except Exception:  # noqa: BLE001 - the worker is gone: give the job back, stop
                with lock:
                    jobs.append(job)
                return
            if launches is not None:
                with lock:
                    results[job] = launches

    def close(self) -> None:
        """End of input: the worker exits on its own. Its exit (interpreter and ncu_report
        teardown, ~0.1 s) is not waited for here but at the next parallel call or at this
        process's exit."""
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        if not _EXITING:
            import atexit  # noqa: PLC0415

            atexit.register(_reap, True)
        _EXITING.append(self.proc)


_EXITING: list = []  # worker processes told to exit, not yet reaped


def _reap(wait: bool = False) -> None:
    for proc in list(_EXITING):
        if wait:
            try:
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a stuck worker
                proc.kill()
                proc.wait()
        if proc.poll() is not None:
            _EXITING.remove(proc)


def _worker_main(cpu: int | None) -> None:
    """Entry point of a :class:`_Worker` process: (path, kernel) pickles in on stdin, summaries
    (or None) out on stdout; anything else written to stdout goes to stderr instead."""
    import pickle  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from profiler import report  # noqa: PLC0415

    report._PREFERRED_CPU = cpu
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    while True:
        try:
            path, kernel = pickle.load(inp)
        except EOFError:
            break
        try:
            launches = summaries(path, kernel)
        except Exception:  # noqa: BLE001 - the caller's serial pass raises it in order
            launches = None
        pickle.dump(launches, out)
        out.flush()


def clear_memo() -> None:
    """Forget the in-process layer (the disk layer stays)."""
    _MEMO.clear()
