"""The profile store: every report's launch summaries, indexed as hive-partitioned parquet and queried with
DuckDB (embedded, no server).

    from profiler import store
    store.index()                                   # incremental; reports/ -> ./.whowaits-store
    df = store.query("SELECT subject, top_waiter FROM launches WHERE shape = 'b1_h64_s1024_d128_fp16'")

:mod:`.schema` declares the table ``launches`` (one row per profiled launch); :mod:`.build` builds it;
:mod:`.query` reads it (pandas frames).
"""

from profiler.store.build import IndexResult, default_roots, default_store, index, rebuild_db
from profiler.store.query import TOP_WAITER_SQL, Store, launches, query, subjects
from profiler.store.schema import SCHEMA_VERSION, columns, describe, launch_row

__all__ = ["IndexResult", "SCHEMA_VERSION", "Store", "TOP_WAITER_SQL", "columns", "default_roots", "default_store",
           "describe", "index", "launch_row", "launches", "query", "rebuild_db", "subjects"]
