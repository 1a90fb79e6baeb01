"""Query the store with SQL (DuckDB, embedded): :func:`query` returns a pandas frame.

The table is ``launches`` (:mod:`profiler.store.schema` documents every column). A query only reads the
store, by construction, not by convention:

* the database is opened read-only, with DuckDB's external access off (no ``read_csv``/``read_text``/
  ``glob`` of any file, no ``COPY … TO``, no ``ATTACH`` of another database, no extension installed or
  loaded, none auto-loaded) and its configuration locked once open (no ``SET`` can undo that);
* before it runs, the text is split into statements by DuckDB's own parser and any statement that is not a
  ``SELECT`` (``FROM …``, ``WITH …``, ``DESCRIBE``, ``SUMMARIZE`` …) or an ``EXPLAIN`` of one is refused with
  one line naming its kind: writes, ``ATTACH``/``DETACH``, ``INSTALL``/``LOAD``, ``SET``/``PRAGMA``,
  ``COPY``/``EXPORT``/``IMPORT``, DDL. One statement per query.

A store whose DuckDB file is missing, damaged or was built by another schema version is rebuilt from its
parquet parts first (:func:`profiler.store.build.ensure_db`, which says what it repaired in one line).
"""

from __future__ import annotations

from pathlib import Path

from profiler.errors import QueryRefused, WhowaitsError
from profiler.store import build as _index

#: a typical question: the top waiter per version at one shape, in ladder order
TOP_WAITER_SQL = ("SELECT subject, top_waiter, round(top_share, 3) AS top_share, duration_ns "
                  "FROM launches WHERE gpu = ? AND shape = ? ORDER BY ladder_order NULLS LAST, subject")


#: what the DuckDB connection of a query is opened with: no file, network or extension outside the store
READ_ONLY_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}

#: the statement kinds a query may run (DuckDB's own ``StatementType`` names)
ALLOWED = ("SELECT", "EXPLAIN")

_REFUSED_WHY = {
    "COPY": "COPY writes or reads files", "EXPORT": "EXPORT writes files", "COPY_DATABASE": "COPY DATABASE writes",
    "ATTACH": "ATTACH opens another database", "DETACH": "DETACH changes the attached databases",
    "LOAD": "INSTALL/LOAD fetch or load extensions", "EXTENSION": "extensions are not loaded",
    "SET": "SET/RESET/USE change the settings", "VARIABLE_SET": "SET VARIABLE changes the session",
    "PRAGMA": "PRAGMA/IMPORT change the settings or the database", "CALL": "CALL runs a procedure",
    "TRANSACTION": "transactions are for writers", "VACUUM": "VACUUM writes", "CHECKPOINT": "CHECKPOINT writes",
    "ANALYZE": "ANALYZE writes statistics", "PREPARE": "PREPARE/EXECUTE are not needed (pass parameters)",
    "EXECUTE": "PREPARE/EXECUTE are not needed (pass parameters)", "MULTI": "PIVOT/UNPIVOT statements create tables",
}


def check_sql(sql: str) -> str:
    """``sql`` when it is one statement that only reads (see the module docstring); else
    :class:`~profiler.errors.QueryRefused` (or a WhowaitsError for a parse error or no statement) in one line."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        msg = " ".join(str(err).split())[:300]
        raise WhowaitsError(f"query failed: {msg}") from None
    if not statements:
        raise WhowaitsError("the query holds no SQL statement (e.g. \"SELECT subject, top_waiter FROM launches\")")
    if len(statements) > 1:
        raise QueryRefused(f"one SQL statement per query, got {len(statements)}")
    kind = statements[0].type.name
    if kind not in ALLOWED:
        why = _REFUSED_WHY.get(kind, "it is not a read")
        raise QueryRefused(f"refused a {kind} statement: queries only read the store ({why}); "
                           "use SELECT … FROM launches")
    return sql


def _ready(store: Path) -> Path:
    store = Path(store)
    if not (store / _index.DB_NAME).exists() and not (store / _index.PARTS).is_dir():
        raise WhowaitsError(f"no store at {store}: build it with `whowaits index` (or pass --store DIR)")
    _index.ensure_db(store)
    return store


class Store:
    """An open, read-only connection to a store, for many queries (the CLI and :func:`query` open one per call).
    Only reads: see the module docstring."""

    def __init__(self, store: Path | None = None):
        self.path = _ready(Path(store or _index.default_store()))
        self.con = _index.connect(self.path, read_only=True, config=READ_ONLY_CONFIG)

    def query(self, sql: str, params: list | None = None):
        import duckdb

        check_sql(sql)
        try:
            try:
                return self.con.execute(sql, params or []).df()
            except duckdb.Error as err:
                if not _index.is_damage(err):
                    raise
                # a block that fails its checksum only when this query reads it: rebuild, say so, run it again
                self.con.close()
                first = (str(err).strip().splitlines() or [type(err).__name__])[0][:160]
                _index.ensure_db(self.path, force=f"damaged ({first})")
                self.con = _index.connect(self.path, read_only=True, config=READ_ONLY_CONFIG)
                return self.con.execute(sql, params or []).df()
        except duckdb.PermissionException:
            raise QueryRefused("refused: queries read only the store's table `launches`, no other file "
                               "(external access is off)") from None
        except duckdb.Error as err:
            msg = " ".join(str(err).split())[:300]
            raise WhowaitsError(f"query failed: {msg} (the table is `launches`; `whowaits query --schema` lists "
                                "its columns)") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def query(sql: str, store: Path | None = None, params: list | None = None):
    """Run ``sql`` over the store's ``launches`` table; a pandas DataFrame."""
    with Store(store) as s:
        return s.query(sql, params)


def launches(where: str | None = None, store: Path | None = None, params: list | None = None):
    """Every column of the rows matching the SQL ``where`` clause (all rows without one)."""
    sql = "SELECT * FROM launches" + (f" WHERE {where}" if where else "") + \
          " ORDER BY gpu, shape, ladder_order NULLS LAST, subject, launch_index"
    return query(sql, store, params)


def subjects(where: str | None = None, names: list[str] | None = None, store: Path | None = None) -> list:
    """The reports whose launches match ``where``, as :class:`profiler.compare.Subject`s in ladder order
    (then by name, ``ext-*`` last), for ``migration`` and ``diff``. ``names`` picks subjects, in that order.
    The reports themselves are read (through the summary cache), so they must still be where they were indexed."""
    from profiler.compare.subjects import Subject

    df = launches(where, store)
    if df.empty:
        raise WhowaitsError(f"no launch in the store matches {where!r}" if where else "the store is empty")
    reps = df.drop_duplicates("report")
    shapes = sorted(set(reps["shape"]))
    if len(shapes) > 1 and not names:
        raise WhowaitsError(f"the rows span several shapes ({', '.join(shapes)}): narrow the WHERE clause to one shape")
    reps = reps.assign(_ext=reps["subject"].str.startswith("ext-"))
    reps = reps.sort_values(["_ext", "ladder_order", "subject"], na_position="last")
    if names:
        picked = []
        for n in names:
            hit = reps[(reps["subject"] == n) | reps["subject"].str.startswith(n + "_")]
            if len(hit) != 1:
                what = "no" if hit.empty else f"{len(hit)}"
                raise WhowaitsError(f"{what} report of '{n}' among the store rows matching the WHERE clause "
                                    f"(subjects there: {', '.join(dict.fromkeys(reps['subject']))})")
            picked.append(hit.iloc[0])
        rows = picked
    else:
        rows = [r for _, r in reps.iterrows()]
    missing = [r["report"] for r in rows if not Path(r["report"]).is_file()]
    if missing:
        raise WhowaitsError(f"indexed report no longer exists: {missing[0]} (run `whowaits index` again)")
    return [Subject(label=r["subject"], path=Path(r["report"]), version=r["subject"], shape=r["shape"]) for r in rows]
