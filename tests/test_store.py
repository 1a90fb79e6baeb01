"""The profile store on the committed reports: `launches` has the documented schema, one row per launch, values
that are the summaries' own (and ncu's own duration for the starter reports), an incremental index (added,
unchanged, updated, removed, a damaged report failing alone), SQL through DuckDB, and migration/diff reading
their inputs from it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parents[1]
H200 = REPO / "reports" / "h200"
SHAPE = "b1_h64_s1024_d128_fp16"


def cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from profiler.cli import main; sys.argv[0] = 'whowaits'; main()",
                           *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def full_store(tmp_path_factory):
    """Every committed report indexed once."""
    from profiler import store

    s = tmp_path_factory.mktemp("store")
    res = store.index([REPO / "reports"], s)
    return s, res


def test_one_row_per_launch_with_the_documented_schema(full_store):
    from profiler import store
    from profiler.store import schema

    s, res = full_store
    reports = sorted(H200.glob("*/*.ncu-rep"))  # the seed shape's, and ladder IV's at other shapes
    assert not res.failed and len(res.added) == len(reports) and res.total_rows == len(reports)
    df = store.query("SELECT * FROM launches ORDER BY subject", s)
    assert list(df.columns) == [c for c, _, _ in schema.columns()] == [r["column"] for r in store.describe()]
    assert sorted(zip(df["subject"], df["shape"])) == sorted((p.parent.name, p.stem) for p in reports)
    assert set(df["gpu"]) == {"h200"} and SHAPE in set(df["shape"])
    for r in df.itertuples():
        assert (s / "launches" / "gpu=h200" / f"subject={r.subject}" / f"shape={r.shape}" / "part-0.parquet").is_file()
    # the parts alone give the same table (any engine can read the store of record)
    import duckdb

    glob = str(s / "launches" / "**" / "*.parquet")
    n = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true)").fetchone()[0]
    assert n == len(reports)
    types = dict(duckdb.connect(str(s / "launches.duckdb"), read_only=True).execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'launches'").fetchall())
    assert types["stall_wait"] == "DOUBLE" and types["grid_x"] == "BIGINT" and types["opcode_waits"].startswith("STRUCT(")


def test_values_are_the_summaries_own(full_store):
    from profiler import store
    from profiler.compare.cache import summaries
    from profiler.compare.diff import top_waiter
    from profiler.provenance import read_sidecar

    s, _ = full_store
    df = store.query("SELECT * FROM launches", s).set_index("subject")
    for subject in ("v01_naive", "v03_tensor_cores", "ext-sdpa-cudnn"):
        path = H200 / subject / f"{SHAPE}.ncu-rep"
        summ = summaries(path)[0]
        row = df.loc[subject]
        top = top_waiter(summ)
        assert row["top_waiter"] == f"{top['class']}·{top['reason']}" and row["top_share"] == top["share"]
        assert row["duration_ns"] == summ["duration_ns"] and row["kernel"] == summ["kernel"]
        for reason, share in summ["stall_share"].items():
            assert row[f"stall_{reason}"] == share
        assert [row["grid_x"], row["grid_y"], row["grid_z"]] == summ["launch"]["grid"]
        for lv in ("l1", "l2", "dram", "smem"):  # null stays null (NaN in the frame), never 0
            got, want = row[f"intensity_{lv}"], summ["roofline"]["intensity"][lv]
            assert (pd.isna(got) and want is None) or got == want
        assert row["section_set"] == read_sidecar(path)["section_set"] == "whowaits"
        assert [w["class"] for w in row["opcode_waits"]] == [w["class"] for w in summ["opcode_waits"]]
        assert pd.isna(row["xu_pipe_pct"]) and summ["xu_pipe_pct"] is None  # seed-shape reports lack the counter
        assert row["xu_pipe_pct_sass"] == summ["xu_pipe_pct_sass"] is not None
        if summ.get("regions") is not None:  # regions sum exactly to the kernel's samples (docs/contract.md)
            assert [(g["name"], g["samples"]) for g in row["regions"]] == [(g["name"], g["samples"]) for g in summ["regions"]]
            assert sum(g["samples"] for g in row["regions"]) == row["samples_total"]
    # docs/ladder.md: v01's FP16 math waits on global loads (66%), v03's tensor cores on ldmatrix (70%)
    assert df.loc["v01_naive", "top_waiter"] == "FP16·long_scoreboard" and round(df.loc["v01_naive", "top_share"], 2) == 0.67
    assert df.loc["v03_tensor_cores", "top_waiter"] == "HMMA·short_scoreboard"
    assert df.loc["v03_tensor_cores", "top_producer"] == "LDSM"
    assert df.loc["ext-sdpa-cudnn", "tensor_path"] == "gmma" and df.loc["ext-sdpa-flash-fullset", "section_set"] == "full"


def test_duration_is_ncus_own(full_store):
    """The starter reports' durations against ncu's own CSV (tests/golden/, `ncu --import --page raw --csv`)."""
    from conftest import golden_raw_si

    from profiler import store

    s, _ = full_store
    df = store.query("SELECT subject, duration_ns FROM launches WHERE section_set = 'full'", s).set_index("subject")
    for subject in ("ext-sdpa-flash-fullset", "ext-sdpa-cudnn-fullset"):
        golden = golden_raw_si(f"{subject}_{SHAPE}", "gpu__time_duration.sum")
        assert df.loc[subject, "duration_ns"] == pytest.approx(golden, rel=1e-3)


def _copy(src_subject: str, root: Path, as_subject: str | None = None) -> Path:
    dest = root / "h200" / (as_subject or src_subject)
    dest.mkdir(parents=True, exist_ok=True)
    for ext in (".ncu-rep", ".json"):
        shutil.copy(H200 / src_subject / f"{SHAPE}{ext}", dest / f"{SHAPE}{ext}")
    return dest / f"{SHAPE}.ncu-rep"


def test_incremental_index(tmp_path):
    from profiler import store

    root, s = tmp_path / "reports", tmp_path / "store"
    _copy("v03_tensor_cores", root)
    _copy("v06_softmax_fusion", root)
    r = store.index([root], s)
    assert sorted(r.added) == [f"h200/v03_tensor_cores/{SHAPE}", f"h200/v06_softmax_fusion/{SHAPE}"] and r.total_rows == 2

    r = store.index([root], s)
    assert (r.added, r.updated, r.removed, r.unchanged, r.rows) == ([], [], [], 2, 0)

    _copy("ext-sdpa-cudnn", root)  # a new report
    rep = _copy("v07_tuned", root, as_subject="v06_softmax_fusion")  # a changed one (other bytes)
    r = store.index([root], s)
    assert r.added == [f"h200/ext-sdpa-cudnn/{SHAPE}"] and r.updated == [f"h200/v06_softmax_fusion/{SHAPE}"]
    assert r.unchanged == 1 and r.total_rows == 3
    kernel = store.query("SELECT kernel FROM launches WHERE subject = 'v06_softmax_fusion'", s)["kernel"].tolist()
    assert len(kernel) == 1 and "v07_tuned" in kernel[0]

    shutil.rmtree(root / "h200" / "v03_tensor_cores")  # a removed one
    (root / "h200" / "bad").mkdir()
    (root / "h200" / "bad" / f"{SHAPE}.ncu-rep").write_bytes(b"not a report")  # a damaged one
    r = store.index([root], s)
    assert r.removed == [f"h200/v03_tensor_cores/{SHAPE}"] and r.total_rows == 2
    assert len(r.failed) == 1 and r.failed[0][0].endswith(f"bad/{SHAPE}.ncu-rep") and "\n" not in r.failed[0][1]
    assert sorted(store.query("SELECT subject FROM launches", s)["subject"]) == ["ext-sdpa-cudnn", "v06_softmax_fusion"]
    assert not (s / "launches" / "gpu=h200" / "subject=v03_tensor_cores").exists()

    (s / "launches.duckdb").unlink()  # the database is derived: rebuilt from the parts by the next query
    assert len(store.query("SELECT * FROM launches", s)) == 2
    assert rep.is_file() and not list(s.rglob("*.tmp"))


def invoke(*args: str):
    """The CLI in this process (typer's runner): its stdout and exit code."""
    from typer.testing import CliRunner

    from profiler.cli import app

    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout


def test_query_cli_formats_and_errors(full_store, tmp_path):
    s, _ = full_store
    sql = "SELECT subject, top_waiter FROM launches WHERE subject LIKE 'v0%' ORDER BY subject"
    code, out = invoke("query", sql, "--store", str(s), "--format", "json")
    assert code == 0
    rows = json.loads(out)
    ladder = len(list(H200.glob(f"v0*/{SHAPE}.ncu-rep")))
    assert rows[0] == {"subject": "v01_naive", "top_waiter": "FP16·long_scoreboard"} and len(rows) == ladder
    code, out = invoke("query", sql, "--store", str(s), "--format", "csv")
    assert out.splitlines()[0] == "subject,top_waiter" and len(out.splitlines()) == ladder + 1
    code, out = invoke("query", "--schema", "--format", "csv")
    assert code == 0 and "top_waiter," in out and "stall_wait,double" in out
    cp = cli("query", "SELECT nope FROM launches", "--store", str(s))  # the real entry point: one line, exit 2
    assert cp.returncode == 2 and cp.stderr.startswith("whowaits: error: query failed:") and len(cp.stderr.splitlines()) == 1
    from profiler import store

    with pytest.raises(WhowaitsError, match="no store at .* `whowaits index`"):
        store.query("SELECT 1", tmp_path / "none")


def test_migration_and_diff_from_the_store(full_store):
    from profiler import compare, store

    s, _ = full_store
    where = f"gpu = 'h200' AND shape = '{SHAPE}' AND section_set = 'whowaits'"
    code, out = invoke("migration", "--from-store", where, "--store", str(s), "--format", "json")
    assert code == 0, out
    got = json.loads(out)
    ref = compare.migrate()  # the same versions found by globbing reports/h200
    assert [r["version"] for r in got["table"]] == list(ref.table["version"])
    assert [r["top_class"] for r in got["table"]] == list(ref.table["top_class"])
    code, out = invoke("diff", "v03", "v04", "--from-store", where, "--store", str(s), "--format", "json")
    assert code == 0, out
    assert json.loads(out)["verdict"] == compare.diff_versions("v03", "v04").verdict
    with pytest.raises(WhowaitsError, match="no launch in the store matches"):
        store.subjects("shape = 'b9_h1_s1_d64_fp16'", store=s)


def test_subjects_errors(full_store):
    from profiler import store

    s, _ = full_store
    with pytest.raises(WhowaitsError, match="no report of 'v99'"):
        store.subjects("section_set = 'whowaits'", names=["v99"], store=s)


def test_xu_pipe_columns_and_parts_written_before_them(full_store, tmp_path):
    from profiler import store

    s, _ = full_store
    got = store.query("SELECT xu_pipe_pct, xu_pipe_pct_sass, tensor_pipe_pct FROM launches "
                      "WHERE subject = 'v20_three_consumers' AND shape = 'b4_h32_s4096_d64_fp16'", s).iloc[0]
    assert round(got["xu_pipe_pct"], 1) == 57.7 and round(got["tensor_pipe_pct"], 1) == 55.8
    assert got["xu_pipe_pct_sass"] == pytest.approx(got["xu_pipe_pct"], abs=1e-6)
    # the committed sweep store's 39 parts were written before the XU columns, and 38 of their reports are not
    # committed: the parts still load, those columns null, and none is dropped as unreadable
    old = tmp_path / "store"
    shutil.copytree(REPO / "reports" / "h200" / "sweeps" / "ladder-3-shapes" / "store", old)
    parts = sorted(old.glob("launches/**/*.parquet"))
    assert len(parts) == 39
    df = store.query("SELECT subject, tensor_pipe_pct, xu_pipe_pct, xu_pipe_pct_sass FROM launches", old)
    assert len(df) == 39 and df["tensor_pipe_pct"].notna().all()
    assert df["xu_pipe_pct"].isna().all() and df["xu_pipe_pct_sass"].isna().all()
    assert sorted(old.glob("launches/**/*.parquet")) == parts
