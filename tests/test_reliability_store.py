"""The store under damage and abuse, on copies of committed reports (tmp_path): `whowaits query` only reads the
store (no write, no other file, no ATTACH/INSTALL/SET …: one line each, and no file outside the store changes);
a damaged DuckDB file, a directory in its place and damaged or replaced parquet parts are rebuilt from the
parts or the reports and said in one line; concurrent `index --full` runs serialize on the store's lock; a
report that became a directory, FIFO or link is reported; relative and absolute roots are one index."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"
SUBJECTS = ("v03_tensor_cores", "v04_swizzle_cp_async", "ext-sdpa-cudnn")
ENTRY = "import sys; sys.argv[0] = 'whowaits'; from profiler.fastcli import main; main()"


def cli(*args: str, cwd: Path = REPO, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The console script itself (fastcli, supervisor, CLI), in a fresh process."""
    e = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=cwd, env=e, capture_output=True, text=True,
                          timeout=timeout)


def one_line(cp: subprocess.CompletedProcess, code: int = 2, prefix: str = "whowaits: error: ") -> str:
    lines = cp.stderr.strip().splitlines()
    assert cp.returncode == code, (cp.returncode, cp.stderr)
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in cp.stderr, cp.stderr
    return lines[0]


def reports(tmp: Path, subjects=SUBJECTS) -> Path:
    root = tmp / "reports"
    for s in subjects:
        d = root / "h200" / s
        d.mkdir(parents=True)
        for f in (H200 / s).glob(f"{SHAPE}.*"):
            shutil.copy2(f, d / f.name)
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A store of three reports, built once; tests copy it before they damage it."""
    from profiler import store

    tmp = tmp_path_factory.mktemp("built")
    root = reports(tmp)
    res = store.index([root], tmp / "store")
    assert not res.failed and res.total_rows == len(SUBJECTS)
    return tmp


@pytest.fixture
def fresh(built, tmp_path):
    shutil.copytree(built, tmp_path / "c", symlinks=True)
    root, s = tmp_path / "c" / "reports", tmp_path / "c" / "store"
    # the state names the original root: index this copy's reports afresh (cached summaries: cheap)
    from profiler import store

    store.index([root], s)
    return root, s


def snapshot(*folders: Path) -> dict[str, str]:
    """Every file under the folders (links and FIFOs by name only) with its sha256."""
    out = {}
    for top in folders:
        for dirpath, dirs, files in os.walk(top):
            for n in dirs + files:
                p = Path(dirpath) / n
                if p.is_symlink() or not p.is_file():
                    out[str(p)] = "dir" if p.is_dir() else "special"
                else:
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# --- 1. query only reads the store ------------------------------------------------------------------------------

REFUSED = [
    ("COPY launches TO '{out}/x.csv'", "COPY"),
    ("COPY (SELECT 1 AS x) TO '{store}/index.json'", "COPY"),
    ("EXPORT DATABASE '{out}/exp'", "EXPORT"),
    ("IMPORT DATABASE '{out}/exp'", "PRAGMA"),
    ("ATTACH '{other}/launches.duckdb' AS v (READ_WRITE)", "ATTACH"),
    ("DETACH launches", "DETACH"),
    ("INSTALL httpfs", "LOAD"),
    ("LOAD httpfs", "LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("RESET threads", "SET"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("INSERT INTO launches SELECT * FROM launches", "INSERT"),
    ("UPDATE launches SET kernel = 'x'", "UPDATE"),
    ("DELETE FROM launches WHERE true", "DELETE"),
    ("ALTER TABLE launches ADD COLUMN y INT", "ALTER"),
    ("DROP TABLE launches", "DROP"),
    ("CHECKPOINT", "CALL"),
    ("SELECT 1; DELETE FROM launches", "one SQL statement"),
]
OUTSIDE = ["SELECT * FROM read_csv('/etc/passwd')", "SELECT * FROM read_text('/etc/hostname')",
           "SELECT * FROM read_blob('/etc/hostname')", "SELECT * FROM glob('{home}/*')",
           "SELECT * FROM read_parquet('{other}/launches/**/*.parquet')", "SELECT * FROM sniff_csv('/etc/passwd')"]


@pytest.mark.slow
def test_query_refuses_every_write_and_every_file_outside_the_store(fresh, tmp_path):
    """Each statement of the issue's list is refused with one line and exit 2, and afterwards no file changed
    anywhere the query could reach: a tmp HOME, another store, the output folder, the store itself."""
    _, s = fresh
    home, out, other = tmp_path / "home", tmp_path / "out", tmp_path / "other"
    home.mkdir()
    out.mkdir()
    shutil.copytree(s, other)
    (home / "secret.txt").write_text("nothing to see")
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    before = snapshot(home, out, other, s)
    for sql, kind in REFUSED:
        cp = cli("query", sql.format(out=out, store=s, other=other), "--store", str(s), env=env)
        line = one_line(cp)
        assert kind in line, line
    for sql in OUTSIDE:
        cp = cli("query", sql.format(home=home, other=other), "--store", str(s), env=env)
        line = one_line(cp)
        assert "refused" in line and "external access is off" in line, line
    for sql in (" ", ";", " ; ;", "-- nothing"):
        one_line(cli("query", sql, "--store", str(s), env=env))
    assert snapshot(home, out, other, s) == before
    assert not (home / ".duckdb").exists()
    # and reads still work, the other store is intact
    cp = cli("query", "SELECT count(*) AS n FROM launches", "--store", str(other), "--format", "json", env=env)
    assert cp.returncode == 0 and json.loads(cp.stdout) == [{"n": len(SUBJECTS)}], cp.stderr


def test_query_check_sql_uses_duckdbs_own_statement_types():
    from profiler.errors import QueryRefused, WhowaitsError
    from profiler.store.query import check_sql

    for ok in ("SELECT 1", "FROM launches", "WITH a AS (SELECT 1) SELECT * FROM a", "DESCRIBE launches",
               "SUMMARIZE launches", "EXPLAIN SELECT 1", "select 'COPY x TO y' AS s"):
        assert check_sql(ok) == ok
    for bad in ("COPY launches TO 'x.csv'", "ATTACH 'x'", "INSTALL httpfs", "SET threads = 1", "USE memory",
                "CALL pragma_version()", "PIVOT launches ON gpu", "BEGIN"):
        with pytest.raises(QueryRefused):
            check_sql(bad)
    for empty in ("", " ", ";", "/* */"):
        with pytest.raises(WhowaitsError, match="no SQL statement"):
            check_sql(empty)


# --- 5. a damaged DuckDB file is damage, not a lock; it is rebuilt ----------------------------------------------

def _flip_block(db: Path) -> None:
    b = bytearray(db.read_bytes())
    for i in range(4096, min(len(b), 4196)):
        b[i] ^= 0xFF
    db.write_bytes(bytes(b))


@pytest.mark.parametrize("damage", ["block", "garbage", "empty", "directory", "fifo", "dangling_link"])
def test_a_damaged_database_is_rebuilt_from_the_parts(fresh, damage):
    root, s = fresh
    db = s / "launches.duckdb"
    db.unlink()
    Path(str(db) + ".wal").unlink(missing_ok=True)
    from profiler.store import build

    build.rebuild_db(s)
    if damage == "block":
        _flip_block(db)  # DuckDB: "Corrupt database file ... in block at location 4096"
    elif damage == "garbage":
        db.write_bytes(b"not a database" * 100)
    elif damage == "empty":
        db.write_bytes(b"")
    elif damage == "directory":
        db.unlink()
        db.mkdir()
        (db / "x").write_text("x")
    elif damage == "fifo":
        db.unlink()
        os.mkfifo(db)
    else:
        db.unlink()
        db.symlink_to(s / "nowhere.duckdb")
    cp = cli("query", "SELECT count(*) AS n FROM launches", "--store", str(s), "--format", "json", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout) == [{"n": len(SUBJECTS)}]
    if damage != "dangling_link":  # a missing database is rebuilt silently; damage is said
        line = one_line(cp, 0, "whowaits: warning: ")
        assert "rebuilt from its parts (3 launches)" in line and "another process" not in line, line
    assert db.is_file() and not db.is_symlink()
    # an index after that is clean
    cp = cli("index", str(root), "--store", str(s))
    assert cp.returncode == 0 and "3 unchanged" in cp.stdout and not cp.stderr, (cp.stdout, cp.stderr)


def test_a_damaged_database_is_rebuilt_by_index_too(fresh):
    root, s = fresh
    _flip_block(s / "launches.duckdb")
    cp = cli("index", str(root), "--store", str(s))
    line = one_line(cp, 0, "whowaits: warning: repaired: ")
    assert "damaged" in line and "rebuilt from its parts" in line and "3 launches in the table" in cp.stdout


def test_a_database_another_process_writes_is_busy_not_damaged(fresh):
    import duckdb

    from profiler.errors import StoreBusy
    from profiler.store import build

    _, s = fresh
    hold = "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(30)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(s / "launches.duckdb")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreBusy, match="being written by another process"):
            build.connect(s, read_only=True)
        line = one_line(cli("query", "SELECT 1", "--store", str(s)))
        assert "another process" in line
    finally:
        holder.kill()
        holder.wait()
    assert duckdb.connect(str(s / "launches.duckdb"), read_only=True).execute(
        "SELECT count(*) FROM launches").fetchone()[0] == len(SUBJECTS)  # never rebuilt under the writer


def test_rows_deleted_behind_the_stores_back_come_back(fresh):
    import duckdb

    root, s = fresh
    con = duckdb.connect(str(s / "launches.duckdb"))
    con.execute("DELETE FROM launches WHERE true")
    con.close()
    cp = cli("index", str(root), "--store", str(s))
    line = one_line(cp, 0, "whowaits: warning: repaired: ")
    assert "held 0 launches, its parts 3" in line and "3 launches in the table" in cp.stdout


# --- 6. damaged parquet parts --------------------------------------------------------------------------------

def _part(s: Path, subject: str = "v04_swizzle_cp_async") -> Path:
    return s / "launches" / "gpu=h200" / f"subject={subject}" / f"shape={SHAPE}" / "part-0.parquet"


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "directory", "link", "fifo"])
def test_a_damaged_part_is_resummarised_on_incremental_index(fresh, damage):
    root, s = fresh
    p = _part(s)
    if damage == "flip":
        b = bytearray(p.read_bytes())
        b[len(b) // 2] ^= 0x01  # magic bytes intact: only the recorded sha256 can tell
        p.write_bytes(bytes(b))
    elif damage == "truncate":
        p.write_bytes(p.read_bytes()[:-9])
    elif damage == "garbage":
        p.write_bytes(b"\0" * 64)
    elif damage == "directory":
        p.unlink()
        p.mkdir()
    elif damage == "link":
        p.unlink()
        p.symlink_to(_part(s, "v03_tensor_cores"))  # another report's valid part
    else:
        p.unlink()
        os.mkfifo(p)
    cp = cli("index", str(root), "--store", str(s), timeout=120)
    line = one_line(cp, 0, "whowaits: warning: repaired: ")
    assert "re-summarised from their reports" in line and "v04_swizzle_cp_async" in line, line
    assert "2 unchanged" in cp.stdout and "1 updated" in cp.stdout, cp.stdout
    assert p.is_file() and not p.is_symlink()
    # the database rebuilt from these parts gives every row
    (s / "launches.duckdb").unlink()
    cp = cli("query", "SELECT subject FROM launches ORDER BY subject", "--store", str(s), "--format", "json")
    assert cp.returncode == 0 and [r["subject"] for r in json.loads(cp.stdout)] == sorted(SUBJECTS), cp.stderr


def test_a_query_over_damaged_parts_drops_them_and_says_so(fresh):
    root, s = fresh
    (s / "launches.duckdb").unlink()
    _part(s).write_bytes(b"PAR1" + b"\0" * 40)  # no footer magic
    cp = cli("query", "SELECT count(*) AS n FROM launches", "--store", str(s), "--format", "json")
    assert cp.returncode == 0 and json.loads(cp.stdout) == [{"n": 2}], cp.stderr
    line = one_line(cp, 0, "whowaits: warning: ")
    assert "1 damaged part(s)" in line and "v04_swizzle_cp_async" in line and "`whowaits index`" in line
    cp = cli("index", str(root), "--store", str(s))  # and the next index brings the row back from its report
    assert cp.returncode == 0 and "1 added" in cp.stdout and "3 launches in the table" in cp.stdout, cp.stdout


def test_a_damaged_index_state_resummarises_from_the_reports(fresh):
    root, s = fresh
    (s / "index.json").write_bytes(b"\xff\xfe{")
    cp = cli("index", str(root), "--store", str(s))
    assert cp.returncode == 0 and "3 added" in cp.stdout and "3 launches in the table" in cp.stdout, cp


# --- 8. two `index --full` at once ----------------------------------------------------------------------------

@pytest.mark.slow
def test_concurrent_full_index_runs_serialize_on_the_lock(fresh):
    root, s = fresh
    results: list[subprocess.CompletedProcess] = []

    def go():
        results.append(cli("index", str(root), "--store", str(s), "--full", timeout=300))

    threads = [threading.Thread(target=go) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for cp in results:
        assert cp.returncode == 0 and not cp.stderr and "3 added" in cp.stdout, (cp.stdout, cp.stderr)
    cp = cli("query", "SELECT count(*) AS n FROM launches", "--store", str(s), "--format", "json")
    assert json.loads(cp.stdout) == [{"n": 3}]


def test_a_held_lock_past_the_wait_is_one_line(fresh):
    import fcntl

    root, s = fresh
    fd = os.open(s / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        cp = cli("index", str(root), "--store", str(s), env={"WHOWAITS_STORE_LOCK_WAIT": "0.3"})
    finally:
        os.close(fd)
    assert "being written by another process" in one_line(cp)


# --- 11. reports that are no longer files; relative vs absolute roots ------------------------------------------

@pytest.mark.parametrize("what", ["directory", "fifo", "broken_link"])
def test_a_report_that_became_no_file_is_reported(fresh, what):
    root, s = fresh
    rep = root / "h200" / "v04_swizzle_cp_async" / f"{SHAPE}.ncu-rep"
    rep.unlink()
    if what == "directory":
        rep.mkdir()
    elif what == "fifo":
        os.mkfifo(rep)
    else:
        rep.symlink_to(root / "gone.ncu-rep")
    cp = cli("index", str(root), "--store", str(s), timeout=120)
    assert cp.returncode == 1, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert lines[0].startswith("whowaits: warning: not indexed: ") and str(rep) in lines[0]
    assert {"directory": "a directory", "fifo": "a FIFO", "broken_link": "a broken symbolic link"}[what] in lines[0]
    assert lines[-1] == "whowaits: error: 1 report(s) not indexed (the store holds the others)" and len(lines) == 2
    assert "2 launches in the table" in cp.stdout


def test_relative_and_absolute_roots_are_one_index(fresh):
    root, s = fresh
    cp = cli("index", "reports", "--store", str(s), cwd=root.parent)
    assert cp.returncode == 0 and "3 unchanged" in cp.stdout, (cp.stdout, cp.stderr)
    cp = cli("index", str(root), "--store", str(s))
    assert cp.returncode == 0 and "3 unchanged" in cp.stdout, (cp.stdout, cp.stderr)


def test_a_part_whose_footer_is_damaged_is_dropped_even_without_its_recorded_sha(fresh):
    """Magic bytes intact, the footer's metadata garbage, and no index.json to hold its sha256: DuckDB's own
    read of the part fails ("TProtocolException"); the rebuild drops that part alone and says so."""
    root, s = fresh
    (s / "launches.duckdb").unlink()
    (s / "index.json").unlink()
    p = _part(s)
    b = bytearray(p.read_bytes())
    b[-60:-8] = b"\xff" * 52
    p.write_bytes(bytes(b))
    cp = cli("query", "SELECT count(*) AS n FROM launches", "--store", str(s), "--format", "json")
    assert cp.returncode == 0 and json.loads(cp.stdout) == [{"n": 2}], cp.stderr
    line = one_line(cp, 0, "whowaits: warning: ")
    assert "v04_swizzle_cp_async" in line and "unreadable" in line, line
    cp = cli("index", str(root), "--store", str(s))
    assert cp.returncode == 0 and "3 launches in the table" in cp.stdout, (cp.stdout, cp.stderr)


@pytest.mark.parametrize("command", ["query", "index"])
def test_a_damaged_block_the_open_does_not_read_is_found_and_rebuilt(fresh, command):
    """A flipped bit in the database's last block (DuckDB blocks are 256 KiB after a 12 KiB header): the file
    opens, `count(*)` answers, but reading every column fails its checksum. The check reads every column, so
    both a query and an index rebuild the table from the parts and say so."""
    root, s = fresh
    db = s / "launches.duckdb"
    b = bytearray(db.read_bytes())
    at = 12288 + 262144 * ((len(b) - 12288 - 1) // 262144) + 100
    for i in range(at, min(at + 64, len(b))):
        b[i] ^= 0x01
    db.write_bytes(bytes(b))
    if command == "query":
        cp = cli("query", "SELECT subject, kernel, duration_ns FROM launches ORDER BY subject", "--store", str(s),
                 "--format", "json")
        assert cp.returncode == 0 and [r["subject"] for r in json.loads(cp.stdout)] == sorted(SUBJECTS), cp.stderr
        assert "rebuilt from its parts (3 launches)" in one_line(cp, 0, "whowaits: warning: ")
    else:
        cp = cli("index", str(root), "--store", str(s))
        assert cp.returncode == 0 and "3 launches in the table" in cp.stdout, cp.stderr
        assert "rebuilt from its parts" in one_line(cp, 0, "whowaits: warning: repaired: ")
