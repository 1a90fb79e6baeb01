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
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from profiler.errors import WhowaitsError
from profiler.io import write_atomic
from profiler import paths, settings
from profiler.store import schema

REPORT_SUFFIX = ".ncu-rep"
DB_NAME = "launches.duckdb"
PARTS = "launches"
STATE = "index.json"


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


def scan(roots: list[Path]) -> list[ReportRef]:
    """Every ``<gpu>/<subject>/<shape>.ncu-rep`` under the roots (hidden folders and files skipped)."""
    found = []
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise WhowaitsError(f"no reports folder at {root} (give the folder holding <gpu>/<subject>/<shape>.ncu-rep)")
        for p in sorted(root.glob(f"*/*/*{REPORT_SUFFIX}")):
            gpu, subject = p.parent.parent.name, p.parent.name
            shape = p.name[: -len(REPORT_SUFFIX)]
            if any(s.startswith(".") for s in (gpu, subject, shape)) or not p.is_file():
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

    def as_dict(self) -> dict:
        return {"store": str(self.store), "added": self.added, "updated": self.updated, "removed": self.removed,
                "unchanged": self.unchanged, "failed": [{"report": r, "error": e} for r, e in self.failed],
                "rows_written": self.rows, "total_rows": self.total_rows, "seconds": round(self.seconds, 3)}


def _stamp() -> str:
    from profiler.compare.cache import fingerprint

    return f"schema{schema.SCHEMA_VERSION}-{fingerprint()}"


def _read_state(store: Path) -> dict:
    try:
        data = json.loads((store / STATE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("reports"), dict) else {}


def part_path(store: Path, gpu: str, subject: str, shape: str) -> Path:
    return store / PARTS / f"gpu={gpu}" / f"subject={subject}" / f"shape={shape}" / "part-0.parquet"


def _remove_part(store: Path, key: tuple[str, str, str]) -> None:
    d = part_path(store, *key).parent
    shutil.rmtree(d, ignore_errors=True)
    for parent in (d.parent, d.parent.parent):  # drop empty subject=/gpu= folders
        try:
            parent.rmdir()
        except OSError:
            break


def _db_columns_sql() -> str:
    return ", ".join(f'"{n}"' for n, _, _ in schema.columns())


def _parquet_source(store: Path) -> str:
    glob = str(store / PARTS / "**" / "*.parquet").replace("'", "''")
    return (f"read_parquet('{glob}', hive_partitioning = true, "
            "hive_types = {'gpu': VARCHAR, 'subject': VARCHAR, 'shape': VARCHAR})")


def connect(store: Path, read_only: bool = False):
    import duckdb

    try:
        return duckdb.connect(str(store / DB_NAME), read_only=read_only)
    except duckdb.Error as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise WhowaitsError(f"cannot open the store's database {store / DB_NAME}: {first}") from None


def _create_db(store: Path, rows=None) -> int:
    """Create ``launches.duckdb`` beside the parts (from ``rows``, an Arrow table, or else from the parts) in a
    temporary file renamed into place; returns the row count."""
    import duckdb

    db = store / DB_NAME
    tmp = store / f".{DB_NAME}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        con.execute(_create_table_sql())
        if rows is not None:
            con.register("_rows", rows)
            con.execute(f"INSERT INTO launches SELECT {_db_columns_sql()} FROM _rows")
        elif any((store / PARTS).glob("**/*.parquet")):
            con.execute(f"INSERT INTO launches SELECT {_db_columns_sql()} FROM {_parquet_source(store)}")
        con.execute(f"CREATE OR REPLACE TABLE store_meta AS SELECT '{_stamp()}' AS stamp")
        n = con.execute("SELECT count(*) FROM launches").fetchone()[0]
        con.close()
        os.replace(tmp, db)
    finally:
        try:
            con.close()
        except Exception:  # noqa: BLE001 - already closed
            pass
        tmp.unlink(missing_ok=True)
        Path(str(tmp) + ".wal").unlink(missing_ok=True)
    return n


def rebuild_db(store: Path) -> int:
    """(Re)create ``launches.duckdb`` from the parquet parts; returns the row count."""
    return _create_db(store)


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


def _db_ok(store: Path, stamp: bool = True) -> bool:
    """Whether ``launches.duckdb`` is usable: it opens and has the documented columns, and (with ``stamp``)
    was written by this schema version and analysis code. Queries do not ask for the stamp: rows of an older
    analysis are still the store's rows until ``whowaits index`` replaces them."""
    if not (store / DB_NAME).is_file():
        return False
    try:
        con = connect(store, read_only=True)
    except WhowaitsError as err:
        if "lock" in str(err).lower():  # another process writes it (whowaits index): never rebuild under it
            raise WhowaitsError(f"the store {store} is being written by another process (whowaits index?): "
                                "try again when it is done") from None
        return False
    try:
        got = con.execute("SELECT stamp FROM store_meta").fetchone()[0]
        cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                          "WHERE table_name = 'launches' ORDER BY ordinal_position").fetchall()]
        return (not stamp or got == _stamp()) and cols == [n for n, _, _ in schema.columns()]
    except Exception:  # noqa: BLE001 - any damage: rebuild
        return False
    finally:
        con.close()


def _update_db(store: Path, changed: dict[tuple[str, str, str], list[dict]], rows, gone: list[tuple[str, str, str]],
               keys_now: set[str] | None = None) -> int:
    """Replace the changed partitions' rows and drop the gone ones, in one transaction. A missing or stale
    database is rebuilt: from the rows in hand when they are the whole store, else from the parquet parts."""
    import pyarrow as pa

    if not _db_ok(store):
        if keys_now is not None and keys_now == {"/".join(k) for k in changed}:
            return _create_db(store, rows)
        return rebuild_db(store)
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
    """Index every report under ``roots`` into ``store`` (incremental unless ``full``); see the module docstring."""
    from profiler.provenance import read_sidecar, sha256_file

    t0 = time.perf_counter()
    roots = [Path(r) for r in (roots or default_roots())]
    store = Path(store or default_store())
    found = scan(roots)
    res = IndexResult(store)
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
        shutil.rmtree(store / PARTS)  # another schema or analysis: every part is rebuilt
    todo, new_state = [], {}
    for key, r in seen.items():
        st = r.path.stat()
        prev = old.get(key)
        if prev and prev.get("path") == str(r.path) and prev.get("size") == st.st_size \
                and prev.get("mtime_ns") == st.st_mtime_ns and part_path(store, r.gpu, r.subject, r.shape).is_file():
            new_state[key] = prev
            res.unchanged += 1
        else:
            todo.append(r)
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
        except WhowaitsError as err:
            res.failed.append((str(r.path), str(err)))
            continue
        st = r.path.stat()
        sha = sha256_file(r.path)
        rows = [schema.launch_row(s, side, gpu=r.gpu, subject=r.subject, shape=r.shape, report=str(r.path),
                                  report_sha256=sha) for s in launches]
        changed[(r.gpu, r.subject, r.shape)] = rows
        (res.updated if r.key in old else res.added).append(r.key)
        new_state[r.key] = {"path": str(r.path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha,
                            "launches": len(rows)}
    gone = [tuple(k.split("/", 2)) for k in old if k not in seen]
    failed_keys = {f"{Path(p).parent.parent.name}/{Path(p).parent.name}/{Path(p).name[:-len(REPORT_SUFFIX)]}"
                   for p, _ in res.failed}
    gone += [tuple(k.split("/", 2)) for k in old if k in failed_keys]  # a report that went bad loses its rows
    res.removed = sorted({"/".join(k) for k in gone if "/".join(k) not in failed_keys})
    res.total_rows = write(store, changed, gone, new_state, stamp)
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
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        tmp = os.path.join(folder, f".part-0.parquet.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(sink.getvalue())
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


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
          timings: dict | None = None) -> int:
    """Write the changed partitions' parts, drop the gone ones, update the DuckDB table and the index state;
    returns the table's row count afterwards. ``timings`` (if given) gets the seconds of each step."""
    t = {"start": time.perf_counter()}
    store.mkdir(parents=True, exist_ok=True)
    table, spans = _rows_table(changed)
    t["arrow"] = time.perf_counter()
    write_parts(store, table, spans, processes)
    t["parts"] = time.perf_counter()
    for key in gone:
        if key not in changed:
            _remove_part(store, key)
    total = _update_db(store, changed, table, [k for k in gone if k not in changed], set(state_reports))
    t["duckdb"] = time.perf_counter()
    if timings is not None:
        steps = list(t)
        timings.update({k: round(t[k] - t[p], 3) for p, k in zip(steps, steps[1:])})
    data = {"stamp": stamp or _stamp(), "reports": state_reports}
    write_atomic(store / STATE, json.dumps(data, indent=1, sort_keys=True))
    return total
