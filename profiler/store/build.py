"""Build and update the store: every report's launch summaries as hive-partitioned parquet + one DuckDB file.

Layout under the store folder (default ``$WHOWAITS_STORE_DIR``, else ``./.whowaits-store``)::

    launches/gpu=<gpu>/subject=<subject>/shape=<shape>/part-0.parquet   one file per report, one row per launch
    launches.duckdb                                                     table ``launches`` (the same rows), for queries
    index.json                                                          what was indexed: path, size, mtime, sha256 per report

The parquet parts are the store of record (any engine reads them: ``read_parquet('launches/**/*.parquet',
hive_partitioning = true)``); the DuckDB table is rebuilt from them whenever it is missing or stale.

:func:`index` is incremental: a report whose size and mtime are unchanged since the last run, under the same
schema version and analysis fingerprint (:func:`profiler.compare.cache.fingerprint`), is not read again; a new
or changed report is summarised (through the summary cache, in parallel where several are new) and its part
replaced; a report that is gone loses its part. Every file is written to a temporary name in its folder and
renamed into place; the DuckDB table is updated in one transaction.

The store heals: writers hold ``<store>/.lock`` (``fcntl.flock``: a second ``index`` waits for the first, up to
``$WHOWAITS_STORE_LOCK_WAIT`` seconds, default 600, then stops in one line); every part's sha256 is kept in
``index.json`` and checked, with the file's type and parquet's magic bytes, before a part is trusted; a
damaged part (or a directory or link in its place) is re-summarised from its report, and a DuckDB file that
does not open, fails its checks or holds other rows than the parts is rebuilt from the parts. What was
repaired is said in one line each (:attr:`IndexResult.notes`, printed by the CLI as warnings). A DuckDB
error is classified by its type and message: a lock held by another process is :class:`StoreBusy`, never
"damage" (nothing is rebuilt under a writer), and damage is never "a lock".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat as _stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from profiler import paths, settings
from profiler.errors import StoreBusy, WhowaitsError
from profiler.io import write_atomic
from profiler.store import schema

REPORT_SUFFIX = ".ncu-rep"
DB_NAME = "launches.duckdb"
PARTS = "launches"
STATE = "index.json"
LOCK = ".lock"
_PARQUET_MAGIC = b"PAR1"


def default_store() -> Path:
    return settings.path("WHOWAITS_STORE_DIR") or Path.cwd() / ".whowaits-store"


def default_roots() -> list[Path]:
    """The reports root (the folder holding ``<gpu>/<subject>/<shape>.ncu-rep``): the parent of
    ``$WHOWAITS_REPORTS_DIR``, else ``./reports``, else this checkout's ``reports/``."""
    return [paths.reports_root()]


@dataclass(frozen=True)
class ReportRef:
    """A report found under a root, with its partition."""

    path: Path
    gpu: str
    subject: str
    shape: str

    @property
    def key(self) -> str:
        return f"{self.gpu}/{self.subject}/{self.shape}"


def file_kind(p: Path) -> str | None:
    """None when ``p`` is a regular file (or a link to one); else what it is, in words."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(p) else "missing"
    except OSError as err:
        return f"unreadable ({err.strerror})"
    if _stat.S_ISREG(st.st_mode):
        return None
    return ("a directory" if _stat.S_ISDIR(st.st_mode) else "a FIFO" if _stat.S_ISFIFO(st.st_mode)
            else "a socket" if _stat.S_ISSOCK(st.st_mode) else "a device" if _stat.S_ISCHR(st.st_mode)
            or _stat.S_ISBLK(st.st_mode) else "not a regular file")


def scan(roots: list[Path], bad: list[tuple[str, str]] | None = None) -> list[ReportRef]:
    """Every ``<gpu>/<subject>/<shape>.ncu-rep`` under the roots (hidden folders and files skipped). A path
    there that is no regular file (a directory, FIFO, broken link) is no report: it is appended to ``bad`` as
    (path, reason) when given, never dropped silently."""
    found = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise WhowaitsError(f"no reports folder at {root} (give the folder holding <gpu>/<subject>/<shape>.ncu-rep)")
        for p in sorted(root.glob(f"*/*/*{REPORT_SUFFIX}")):
            gpu, subject = p.parent.parent.name, p.parent.name
            shape = p.name[: -len(REPORT_SUFFIX)]
            if any(s.startswith(".") for s in (gpu, subject, shape)):
                continue
            kind = file_kind(p)
            if kind is not None:
                if bad is not None:
                    bad.append((str(p), f"{kind}, not a report file"))
                continue
            found.append(ReportRef(p, gpu, subject, shape))
    return found


@dataclass
class IndexResult:
    store: Path
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (report, one-line reason)
    rows: int = 0  # rows written this run
    total_rows: int = 0  # rows in the table afterwards
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what was repaired, one line each

    def as_dict(self) -> dict:
        return {"store": str(self.store), "added": self.added, "updated": self.updated, "removed": self.removed,
                "unchanged": self.unchanged, "failed": [{"report": r, "error": e} for r, e in self.failed],
                "rows_written": self.rows, "total_rows": self.total_rows, "seconds": round(self.seconds, 3),
                "repaired": self.notes}


def _stamp() -> str:
    from profiler.compare.cache import fingerprint

    return f"schema{schema.SCHEMA_VERSION}-{fingerprint()}"


def _read_state(store: Path) -> dict:
    """``index.json``, or {} when it is missing or damaged (every report is then summarised again)."""
    if file_kind(store / STATE) is not None:
        return {}
    try:
        data = json.loads((store / STATE).read_bytes())
    except (OSError, ValueError):
        return {}
    if not (isinstance(data, dict) and isinstance(data.get("reports"), dict)):
        return {}
    data["reports"] = {k: v for k, v in data["reports"].items() if isinstance(k, str) and k.count("/") == 2
                       and isinstance(v, dict)}
    return data


def _lock_wait() -> float:
    try:
        return max(0.0, float(settings.text("WHOWAITS_STORE_LOCK_WAIT") or "600"))
    except ValueError:
        return 600.0


@contextlib.contextmanager
def locked(store: Path, wait: float | None = None) -> Iterator[None]:
    """Hold the store's writer lock (``<store>/.lock``, ``fcntl.flock``) while the block runs: a second writer
    waits up to ``wait`` seconds (default ``$WHOWAITS_STORE_LOCK_WAIT``, 600), then :class:`StoreBusy`. A store
    folder where no lock file can be made (read-only) is used without one."""
    import fcntl

    wait = _lock_wait() if wait is None else wait
    try:
        store.mkdir(parents=True, exist_ok=True)
        if (store / LOCK).is_symlink() or ((store / LOCK).exists() and not (store / LOCK).is_file()):
            _remove(store / LOCK)
        fd = os.open(store / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StoreBusy(f"the store {store} is being written by another process (whowaits index?); "
                                    f"waited {wait:.0f} s: try again when it is done") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove(p: Path) -> None:
    """Remove whatever is at ``p`` (a file, a link, a FIFO, a folder tree); nothing when there is nothing."""
    try:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink()
    except FileNotFoundError:
        pass


def _sha_file(p: Path) -> str:
    with open(p, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def part_problem(p: Path, sha: str | None = None) -> str | None:
    """None when ``p`` is a sound part: a regular file (not a link), parquet's magic bytes at both ends and,
    when ``sha`` is given, those bytes; else what is wrong, in a few words."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return "missing"
    except OSError as err:
        return f"unreadable ({err.strerror})"
    if not _stat.S_ISREG(st.st_mode):
        return "a symbolic link" if _stat.S_ISLNK(st.st_mode) else (file_kind(p) or "not a regular file")
    try:
        with open(p, "rb", opener=lambda f, fl: os.open(f, fl | os.O_NOFOLLOW | os.O_NONBLOCK)) as f:
            data = f.read()
    except OSError as err:
        return f"unreadable ({err.strerror})"
    if len(data) < 12 or data[:4] != _PARQUET_MAGIC or data[-4:] != _PARQUET_MAGIC:
        return "not a parquet file (no magic bytes)" if data[:4] != _PARQUET_MAGIC or len(data) < 12 else "truncated"
    if sha is not None and hashlib.sha256(data).hexdigest() != sha:
        return "its bytes changed since it was written"
    return None


def part_path(store: Path, gpu: str, subject: str, shape: str) -> Path:
    return store / PARTS / f"gpu={gpu}" / f"subject={subject}" / f"shape={shape}" / "part-0.parquet"


def _remove_part(store: Path, key: tuple[str, str, str]) -> None:
    d = part_path(store, *key).parent
    _remove(d)
    for parent in (d.parent, d.parent.parent):  # drop empty subject=/gpu= folders
        try:
            parent.rmdir()
        except OSError:
            break


def _db_columns_sql(present: set[str] | None = None) -> str:
    """The table's columns in order; with ``present`` (the columns a source has), a column it lacks is a typed
    NULL: a part written before the column was added (an older SCHEMA_VERSION, e.g. a committed sweep store
    whose reports are not at hand) still loads, the new columns null until ``whowaits index`` re-summarises it."""
    return ", ".join(f'"{n}"' if present is None or n in present else f'CAST(NULL AS {_duck_type(t)}) AS "{n}"'
                     for n, t, _ in schema.columns())


def _insert_parts(con, src: str) -> None:
    present = {d[0] for d in con.execute(f"SELECT * FROM {src} LIMIT 0").description}
    con.execute(f"INSERT INTO launches SELECT {_db_columns_sql(present)} FROM {src}")


def _parquet_source(store: Path, files: list[Path] | None = None) -> str:
    """``read_parquet`` of the given part files (default: every ``part-0.parquet`` under the parts folder)."""
    if files is None:
        glob = str(store / PARTS / "**" / "*.parquet").replace("'", "''")
        src = f"'{glob}'"
    else:
        src = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in files) + "]"
    return (f"read_parquet({src}, hive_partitioning = true, "
            "hive_types = {'gpu': VARCHAR, 'subject': VARCHAR, 'shape': VARCHAR}, union_by_name = true)")


class DamagedDb(WhowaitsError):
    """The store's DuckDB file does not open as a database (it is rebuilt from the parts)."""


def _is_lock_error(err: Exception) -> bool:
    """DuckDB's "another process holds the file" error: an IOException saying it could not set the lock
    (never a corrupt file, whose message may hold "block")."""
    import duckdb

    msg = str(err)
    return isinstance(err, duckdb.IOException) and ("Could not set lock" in msg or "Conflicting lock" in msg)


def is_damage(err: Exception) -> bool:
    """Whether a DuckDB error raised while reading or writing the store's database says the file is damaged
    ("Corrupt database file …", an I/O error other than a held lock), not that the SQL was wrong."""
    import duckdb

    if isinstance(err, duckdb.IOException):
        return not _is_lock_error(err)
    return type(err).__name__ in ("Error", "InternalException", "SerializationException", "FatalException") \
        or "Corrupt database file" in str(err)


def connect(store: Path, read_only: bool = False, config: dict | None = None):
    """A DuckDB connection to the store's database: :class:`StoreBusy` when another process holds it,
    :class:`DamagedDb` when it does not open as a database (or is no regular file)."""
    import duckdb

    db = store / DB_NAME
    kind = file_kind(db) if db.exists() or db.is_symlink() else None
    if kind is not None:
        raise DamagedDb(f"the store's database {db} is {kind}")
    try:
        return duckdb.connect(str(db), read_only=read_only, config=config or {})
    except duckdb.Error as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if _is_lock_error(err):
            raise StoreBusy(f"the store {store} is being written by another process (whowaits index?): "
                            "try again when it is done") from None
        raise DamagedDb(f"the store's database {db} is damaged: {first}") from None


def _create_db(store: Path, rows=None, files: list[Path] | None = None,
               unreadable: list[tuple[Path, str]] | None = None) -> int:
    """Create ``launches.duckdb`` beside the parts (from ``rows``, an Arrow table, or else from the part
    ``files``, default every part) in a temporary file renamed into place; returns the row count. A part
    DuckDB cannot read is left out and appended to ``unreadable`` as (file, DuckDB's first line)."""
    import duckdb

    if files is None and rows is None:
        files = sorted((store / PARTS).glob("**/*.parquet"))
    db = store / DB_NAME
    tmp = store / f".{DB_NAME}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(_create_table_sql())
        if rows is not None:
            con.register("_rows", rows)
            con.execute(f"INSERT INTO launches SELECT {_db_columns_sql()} FROM _rows")
        elif files:
            try:
                _insert_parts(con, _parquet_source(store, files))
            except duckdb.Error:  # one part DuckDB cannot read: read them one by one, keep the others
                con.execute("DELETE FROM launches")
                for f in files:
                    try:
                        _insert_parts(con, _parquet_source(store, [f]))
                    except duckdb.Error as err:
                        if unreadable is not None:
                            unreadable.append((f, (str(err).strip().splitlines() or [type(err).__name__])[0][:120]))
        con.execute(f"CREATE OR REPLACE TABLE store_meta AS SELECT '{_stamp()}' AS stamp")
        n = con.execute("SELECT count(*) FROM launches").fetchone()[0]
        con.close()
        if (db.exists() or db.is_symlink()) and file_kind(db) is not None or db.is_symlink():
            _remove(db)  # a directory or link where the database belongs
        Path(str(db) + ".wal").unlink(missing_ok=True)
        os.replace(tmp, db)
    finally:
        try:
            con.close()
        except Exception:  # noqa: BLE001 - already closed
            pass
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
    return n


def _part_key(d: Path) -> str:
    """``gpu/subject/shape`` of a part's ``shape=`` folder."""
    return "/".join(x.name.split("=", 1)[1] for x in (d.parent.parent, d.parent, d))


def _drop_parts(store: Path, bad: list[tuple[str, str]], notes: list[str] | None, reports: dict | None) -> None:
    """Remove the parts ``bad`` names ((key, why) each) and their index state entries (``reports`` in hand, else
    ``index.json``'s, rewritten), so the next ``whowaits index`` re-summarises them; one note says which."""
    if not bad:
        return
    for key, _ in bad:
        _remove(part_path(store, *key.split("/", 2)).parent)
    if reports is not None:
        for key, _ in bad:
            reports.pop(key, None)
    else:
        state = _read_state(store)
        if state:
            for key, _ in bad:
                state["reports"].pop(key, None)
            try:
                write_atomic(store / STATE, json.dumps(state, indent=1, sort_keys=True))
            except OSError:
                pass
    if notes is not None:
        keys = ", ".join(f"{k} ({why})" for k, why in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        notes.append(f"{len(bad)} damaged part(s) of the store dropped: {keys}; `whowaits index` "
                     "re-summarises them from their reports")


def sound_parts(store: Path, notes: list[str] | None = None, reports: dict | None = None) -> list[Path]:
    """The part files that can be trusted: each under a ``gpu=/subject=/shape=`` folder, sound by
    :func:`part_problem` and, where ``index.json`` knows its sha256, holding those bytes. Others are removed
    (with their ``index.json`` entry, so the next ``whowaits index`` re-summarises them from their reports),
    one note in ``notes`` saying which. ``reports``: the index state's entries in hand (a writer's, updated
    in place; it writes them), else ``index.json``'s."""
    known = reports if reports is not None else _read_state(store).get("reports", {})
    good, bad = [], []
    root = store / PARTS
    if root.is_dir():
        for d in sorted(root.glob("gpu=*/subject=*/shape=*")):
            key = _part_key(d)
            if not d.is_dir() or d.is_symlink():
                bad.append((key, "not a folder"))
                continue
            p = d / "part-0.parquet"
            if not (p.exists() or p.is_symlink()):
                continue
            why = part_problem(p, (known.get(key) or {}).get("part_sha256"))
            if why is None:
                good.append(p)
            else:
                bad.append((key, why))
    _drop_parts(store, bad, notes, reports)
    return good


def rebuild_db(store: Path, notes: list[str] | None = None, reports: dict | None = None) -> int:
    """(Re)create ``launches.duckdb`` from the sound parquet parts (:func:`sound_parts`; a part DuckDB then
    cannot read is dropped the same way); returns the row count."""
    unreadable: list[tuple[Path, str]] = []
    n = _create_db(store, files=sound_parts(store, notes, reports), unreadable=unreadable)
    _drop_parts(store, [(_part_key(f.parent), f"unreadable: {why}") for f, why in unreadable], notes, reports)
    return n


def ensure_db(store: Path, notes: list[str] | None = None, force: str | None = None) -> None:
    """Make ``launches.duckdb`` usable for queries: rebuilt (under the writer lock) from the parts when it is
    missing, damaged or of another layout; a damaged one is said in one line (to ``notes``, else to stderr).
    Rows of an older analysis stay the store's rows until ``whowaits index`` replaces them. ``force``: rebuild
    anyway, for this reason (a query found damage the checks missed)."""
    problem = force or _db_problem(store, stamp=False)
    if problem is None:
        return
    said: list[str] = []
    with locked(store):
        problem = force or _db_problem(store, stamp=False)  # another process may have rebuilt it meanwhile
        if problem is None:
            return
        n = rebuild_db(store, said)
        if problem != "missing":
            said.insert(0, f"the store's database was {problem}: rebuilt from its parts ({n} launches)")
    if notes is not None:
        notes.extend(said)
    else:
        import sys

        for line in said:
            print(f"whowaits: warning: {' '.join(line.split())}", file=sys.stderr)


def _duck_type(t) -> str:
    import pyarrow as pa

    if pa.types.is_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_list(t):
        inner = t.value_type
        if pa.types.is_struct(inner):
            fields = ", ".join(f'"{f.name}" {_duck_type(f.type)}' for f in inner)
            return f"STRUCT({fields})[]"
        return f"{_duck_type(inner)}[]"
    raise TypeError(f"no DuckDB type for {t}")


def _create_table_sql() -> str:
    cols = ", ".join(f'"{n}" {_duck_type(t)}' for n, t, _ in schema.columns())
    return f"CREATE TABLE launches ({cols})"


def _db_problem(store: Path, stamp: bool = True) -> str | None:
    """None when ``launches.duckdb`` is usable: it opens and has the documented columns, and (with ``stamp``)
    was written by this schema version and analysis code; else what is wrong ("missing", "stale", "damaged:
    …"). A database another process holds raises :class:`StoreBusy` (never rebuilt under a writer)."""
    import duckdb

    db = store / DB_NAME
    if not (db.exists() or db.is_symlink()):
        return "missing"
    try:
        con = connect(store, read_only=True)
    except DamagedDb as err:
        return "damaged (" + str(err).split(": ", 1)[-1] + ")" if ": " in str(err) else f"damaged ({err})"
    try:
        got = con.execute("SELECT stamp FROM store_meta").fetchone()[0]
        cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                          "WHERE table_name = 'launches' ORDER BY ordinal_position").fetchall()]
        if cols != [n for n, _, _ in schema.columns()]:
            return "of another layout"
        if stamp and got != _stamp():
            return "stale"
        # every column of every row: DuckDB checks each block's checksum as it reads it (a store's table is
        # small: 30 ms for the committed reports' rows)
        con.execute("SELECT bit_xor(hash(l)) FROM launches AS l").fetchone()
        return None
    except duckdb.Error as err:
        return f"damaged ({' '.join(str(err).split())[:160]})"
    except (TypeError, IndexError):
        return "damaged (no stamp)"
    finally:
        con.close()


def _db_ok(store: Path, stamp: bool = True) -> bool:
    return _db_problem(store, stamp) is None


def _update_db(store: Path, changed: dict[tuple[str, str, str], list[dict]], rows, gone: list[tuple[str, str, str]],
               keys_now: set[str] | None = None, notes: list[str] | None = None, reports: dict | None = None) -> int:
    """Replace the changed partitions' rows and drop the gone ones, in one transaction. A missing or stale
    database is rebuilt: from the rows in hand when they are the whole store, else from the parquet parts
    (a damaged one is said in ``notes``)."""
    import pyarrow as pa

    problem = _db_problem(store)
    if problem is not None:
        if keys_now is not None and keys_now == {"/".join(k) for k in changed}:
            n = _create_db(store, rows)
        else:
            n = rebuild_db(store, notes, reports)
        if problem.startswith("damaged") and notes is not None:
            notes.append(f"the store's database was {problem}: rebuilt from its parts ({n} launches)")
        return n
    import duckdb

    con = connect(store)
    try:
        keys = pa.Table.from_pylist([{"gpu": g, "subject": s, "shape": k} for g, s, k in list(changed) + gone],
                                    schema=pa.schema([(n, pa.string()) for n in schema.PARTITION_KEYS]))
        con.register("_keys", keys)
        con.register("_rows", rows)
        con.execute("BEGIN TRANSACTION")
        con.execute("DELETE FROM launches WHERE (gpu, subject, shape) IN (SELECT (gpu, subject, shape) FROM _keys)")
        con.execute(f"INSERT INTO launches SELECT {_db_columns_sql()} FROM _rows")
        con.execute("COMMIT")
        return con.execute("SELECT count(*) FROM launches").fetchone()[0]
    except duckdb.Error as err:
        if not is_damage(err):
            raise
        con.close()
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
        n = rebuild_db(store, notes, reports)  # the changed parts are written: they are the store of record
        if notes is not None:
            notes.append(f"the store's database was damaged ({first}): rebuilt from its parts ({n} launches)")
        return n
    finally:
        con.close()


def _summaries(refs: list[ReportRef], processes: int | None) -> dict[str, list[dict] | str]:
    """Each report's launch summaries (or the one-line reason it could not be read)."""
    from profiler.compare.cache import summaries, summaries_many

    if not refs:
        return {}
    try:
        got = summaries_many([(r.path, None) for r in refs], processes=processes)
        return {r.key: g for r, g in zip(refs, got)}
    except WhowaitsError:
        pass  # one bad report: go through them one by one to keep the good ones
    out: dict[str, list[dict] | str] = {}
    for r in refs:
        try:
            out[r.key] = summaries(r.path)
        except WhowaitsError as err:
            out[r.key] = str(err)
    return out


def index(roots: list[Path] | None = None, store: Path | None = None, *, full: bool = False,
          processes: int | None = None) -> IndexResult:
    """Index every report under ``roots`` into ``store`` (incremental unless ``full``); see the module docstring.
    Holds the store's writer lock (:func:`locked`) throughout."""
    roots = [Path(os.path.abspath(r)) for r in (roots or default_roots())]  # one report, one key, however named
    store = Path(store or default_store())
    with locked(store):
        return _index(roots, store, full, processes)


def _index(roots: list[Path], store: Path, full: bool, processes: int | None) -> IndexResult:
    from profiler.provenance import read_sidecar, sha256_file

    t0 = time.perf_counter()
    bad: list[tuple[str, str]] = []
    found = scan(roots, bad)
    res = IndexResult(store)
    res.failed.extend(bad)
    seen: dict[str, ReportRef] = {}
    for r in found:
        if r.key in seen:
            res.failed.append((str(r.path), f"same gpu/subject/shape as {seen[r.key].path}: index one of them"))
            continue
        seen[r.key] = r
    state = _read_state(store)
    stamp = _stamp()
    old = state.get("reports", {}) if state.get("stamp") == stamp and not full else {}
    if (state.get("stamp") != stamp or full) and (store / PARTS).exists():
        _remove(store / PARTS)  # another schema or analysis: every part is rebuilt
    todo, new_state = [], {}
    damaged: list[str] = []
    for key, r in seen.items():
        st = r.path.stat()
        prev = old.get(key)
        if prev and prev.get("path") == str(r.path) and prev.get("size") == st.st_size \
                and prev.get("mtime_ns") == st.st_mtime_ns:
            why = part_problem(part_path(store, r.gpu, r.subject, r.shape), prev.get("part_sha256"))
            if why is None:
                new_state[key] = prev
                res.unchanged += 1
                continue
            if why != "missing":
                damaged.append(f"{key} ({why})")
        todo.append(r)
    if damaged:
        res.notes.append(f"{len(damaged)} damaged part(s) re-summarised from their reports: "
                         + ", ".join(damaged[:3]) + (f" and {len(damaged) - 3} more" if len(damaged) > 3 else ""))
    got = _summaries(todo, processes)
    changed: dict[tuple[str, str, str], list[dict]] = {}
    for r in todo:
        launches = got[r.key]
        if isinstance(launches, str):
            res.failed.append((str(r.path), launches))
            continue
        if not launches:
            res.failed.append((str(r.path), "no kernel launch in the report"))
            continue
        try:
            side = read_sidecar(r.path)
            st = r.path.stat()
            sha = sha256_file(r.path)
            rows = [schema.launch_row(s, side, gpu=r.gpu, subject=r.subject, shape=r.shape, report=str(r.path),
                                      report_sha256=sha) for s in launches]
        except WhowaitsError as err:
            res.failed.append((str(r.path), str(err)))
            continue
        except OSError as err:
            res.failed.append((str(r.path), f"cannot read it ({err.strerror})"))
            continue
        changed[(r.gpu, r.subject, r.shape)] = rows
        (res.updated if r.key in old else res.added).append(r.key)
        new_state[r.key] = {"path": str(r.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha,
                            "launches": len(rows)}
    gone = [tuple(k.split("/", 2)) for k in old if k not in seen]
    failed_keys = {f"{Path(p).parent.parent.name}/{Path(p).parent.name}/{Path(p).name[:-len(REPORT_SUFFIX)]}"
                   for p, _ in res.failed}
    gone += [tuple(k.split("/", 2)) for k in old if k in failed_keys]  # a report that went bad loses its rows
    res.removed = sorted({"/".join(k) for k in gone if "/".join(k) not in failed_keys})
    res.total_rows = write(store, changed, gone, new_state, stamp, notes=res.notes)
    res.rows = sum(len(v) for v in changed.values())
    res.seconds = time.perf_counter() - t0
    return res


#: fewest changed partitions for which parts are written by worker processes (each part is a parquet file of
#: its own: ~4 ms of CPU each, most of it pyarrow's fixed cost per file, paid under the GIL)
PARALLEL_MIN = 256


def _rows_table(changed: dict[tuple[str, str, str], list[dict]]):
    """(all rows as one Arrow table in the full schema, [(key, offset, length)] per partition)."""
    import pyarrow as pa

    spans, rows, at = [], [], 0
    for key, rs in changed.items():
        spans.append((key, at, len(rs)))
        rows.extend(rs)
        at += len(rs)
    return pa.Table.from_pylist(rows, schema=schema.arrow_schema()), spans


def _write_slices(store: Path, table, spans) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    made: set[str] = set()
    for key, off, n in spans:
        # A part holds one report's few rows: no compression (zstd tripled the cost of writing one), no
        # statistics, dictionaries or embedded Arrow schema, encoded in memory and written with one call
        # (1.9 against 2.4 ms of CPU a part for pyarrow's own file path, 300 parts measured). The column types
        # are parquet's own, so every reader gets the documented schema.
        sink = pa.BufferOutputStream()
        pq.write_table(table.slice(off, n), sink, compression="none", write_statistics=False, use_dictionary=False,
                       store_schema=False)
        dest = str(part_path(store, *key))
        folder = os.path.dirname(dest)
        if folder not in made:
            _clear_way(store / PARTS, Path(folder))
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        if os.path.isdir(dest) and not os.path.islink(dest):
            shutil.rmtree(dest, ignore_errors=True)  # a folder where the part belongs: os.replace cannot
        tmp = os.path.join(folder, f".part-0.parquet.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(sink.getvalue())
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _clear_way(top: Path, folder: Path) -> None:
    """Remove anything that is not a real folder (a file, a link, a FIFO) on the way from ``top`` down to
    ``folder``, so the part's folders can be made."""
    parts = folder.relative_to(top.parent).parts
    at = top.parent
    for name in parts:
        at = at / name
        if at.is_symlink() or (at.exists() and not at.is_dir()):
            _remove(at)


def write_parts(store: Path, table, spans, processes: int | None = None) -> None:
    """Write each partition's part (its rows of ``table``, partition columns dropped): here for a few, else in
    ``processes`` worker processes (default: the CPUs this process may use), contiguous chunks each."""
    table = table.drop_columns(list(schema.PARTITION_KEYS))
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    n = processes or cpus
    if len(spans) < PARALLEL_MIN or n < 2:
        _write_slices(store, table, spans)
        return
    import pickle
    import subprocess
    import sys

    import pyarrow as pa

    # fresh interpreters fed through a pipe (not multiprocessing: its spawn re-imports the caller's __main__)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    procs = []
    per = -(-len(spans) // n)
    for i in range(0, len(spans), per):
        chunk = spans[i:i + per]
        first, last = chunk[0][1], chunk[-1][1] + chunk[-1][2]
        sink = pa.BufferOutputStream()
        sub = table.slice(first, last - first)
        with pa.ipc.new_stream(sink, sub.schema) as w:
            w.write_table(sub)
        p = subprocess.Popen([sys.executable, "-c", "from profiler.store.build import _worker_main; _worker_main()"],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        procs.append((p, (str(store), sink.getvalue().to_pybytes(), [(k, o - first, c) for k, o, c in chunk])))
    for p, payload in procs:
        try:
            pickle.dump(payload, p.stdin)
            p.stdin.close()
        except OSError:
            pass
    errors = []
    for p, _ in procs:
        err = p.stderr.read().decode(errors="replace")
        if p.wait() != 0:
            errors.append((err.strip().splitlines() or [f"exit code {p.returncode}"])[-1])
    if errors:
        raise WhowaitsError(f"writing the store's parts failed: {errors[0]}")


def _worker_main() -> None:
    import pickle
    import sys

    import pyarrow as pa

    store, data, spans = pickle.load(sys.stdin.buffer)
    table = pa.ipc.open_stream(data).read_all()
    _write_slices(Path(store), table, [(tuple(k), o, c) for k, o, c in spans])


def write(store: Path, changed: dict[tuple[str, str, str], list[dict]], gone: list[tuple[str, str, str]],
          state_reports: dict, stamp: str | None = None, processes: int | None = None,
          timings: dict | None = None, notes: list[str] | None = None) -> int:
    """Write the changed partitions' parts, drop the gone ones, update the DuckDB table and the index state;
    returns the table's row count afterwards. ``timings`` (if given) gets the seconds of each step; ``notes``
    what was repaired. A table whose row count is not the parts' (rows deleted behind the store's back) is
    rebuilt from the parts."""
    t = {"start": time.perf_counter()}
    store.mkdir(parents=True, exist_ok=True)
    table, spans = _rows_table(changed)
    t["arrow"] = time.perf_counter()
    write_parts(store, table, spans, processes)
    t["parts"] = time.perf_counter()
    for key in gone:
        if key not in changed:
            _remove_part(store, key)
    for key in changed:
        entry = state_reports.get("/".join(key))
        if entry is not None:
            entry["part_sha256"] = _sha_file(part_path(store, *key))
    total = _update_db(store, changed, table, [k for k in gone if k not in changed], set(state_reports), notes,
                       state_reports)
    expected = sum(int(e.get("launches") or 0) for e in state_reports.values())
    if total != expected and all(isinstance(e.get("launches"), int) for e in state_reports.values()):
        # rows lost or added behind the store's back: the parts are the store of record
        was = total
        total = rebuild_db(store, notes, state_reports)
        if notes is not None:
            notes.append(f"the store's database held {was} launches, its parts {expected}: rebuilt from the parts "
                         f"({total} launches)")
    t["duckdb"] = time.perf_counter()
    if timings is not None:
        steps = list(t)
        timings.update({k: round(t[k] - t[p], 3) for p, k in zip(steps, steps[1:])})
    data = {"stamp": stamp or _stamp(), "reports": state_reports}
    if (store / STATE).is_symlink() or file_kind(store / STATE) not in (None, "missing"):
        _remove(store / STATE)  # a folder, FIFO or link where the state belongs
        if notes is not None:
            notes.append(f"{store / STATE} was no regular file: rewritten")
    write_atomic(store / STATE, json.dumps(data, indent=1, sort_keys=True))
    return total
