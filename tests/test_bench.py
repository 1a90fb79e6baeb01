"""Bench without a GPU: the committed same-run result files, the writer, and the CLI's error path."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest

from kernels import bench
from kernels.config import Shape
from profiler.errors import WhowaitsError

REPO = Path(__file__).resolve().parent.parent
BENCH_FILES = sorted((REPO / "reports" / "h200" / "bench").glob("*.json"))
REQUIRED_ROW = {"implementation", "shape", "ms", "tflops", "rel_err", "snr_db"}
REQUIRED_PROV = {"gpu", "driver", "torch", "cuda", "git_commit", "time", "method"}


def test_committed_bench_files_exist():
    assert BENCH_FILES, "no committed bench result under reports/h200/bench"


@pytest.mark.parametrize("path", BENCH_FILES, ids=[p.name for p in BENCH_FILES])
def test_committed_bench_file_is_consistent(path):
    data = json.loads(path.read_text())
    assert REQUIRED_PROV <= set(data["provenance"]), data["provenance"].keys()
    assert "H200" in data["provenance"]["gpu"]
    rows = data["rows"]
    names = [r["implementation"] for r in rows]
    # files since flex-attention joined (they carry dense_gemm) hold every baseline; older ones the six before;
    # a race file (its summary names cudnn_best, ladder IV on) at least the race's baselines
    if "cudnn_best" in data.get("summary", {}):
        expected = bench.RACE_BASELINES
    else:
        expected = bench.BASELINES if "dense_gemm" in data else bench.BASELINES_BEFORE_FLEX
    assert set(expected) <= set(names), "baselines must be measured in the same run"
    assert any(re.match(r"v\d\d_", n) for n in names), "a ladder version (vNN_slug) among the rows"
    shape_key = path.stem.split("-", 3)[-1]
    shape = Shape.parse(shape_key)
    by = {r["implementation"]: r for r in rows}
    for r in rows:
        assert REQUIRED_ROW <= set(r)
        assert r["shape"] == shape_key
        if r["ms"] is None:
            assert r["note"], f"{r['implementation']}: a skipped row must say why"
            continue
        # TFLOPS follows from the shape's FLOPs and the median time
        assert r["tflops"] == pytest.approx(shape.flops() / (r["ms"] * 1e-3) / 1e12, rel=1e-9)
        assert r["ms_min"] <= r["ms"] <= r["ms_p90"]
        assert r["reps"] >= 30
        tol = 5e-3 if shape.dtype == "fp16" else 1e-2
        assert r["rel_err"] is not None and r["rel_err"] <= tol, r
        assert r["snr_db"] == pytest.approx(-20 * math.log10(r["rel_err"]), abs=1e-6)
        if by["sdpa-flash"]["tflops"]:
            assert r["pct_sdpa_flash"] == pytest.approx(100 * r["tflops"] / by["sdpa-flash"]["tflops"])
    if "dense_gemm" in data:
        _check_seed_columns(data, shape)
    # the CSV beside it carries the same rows
    with open(path.with_suffix(".csv")) as fh:
        csv_rows = list(csv.DictReader(fh))
    assert [c["implementation"] for c in csv_rows] == names
    for c, r in zip(csv_rows, rows):
        if r["ms"] is not None:
            assert float(c["ms"]) == pytest.approx(r["ms"])


def _check_seed_columns(data: dict, shape: Shape) -> None:
    """The seed's columns of a file written since 2026-12-01 ladder III: max_err, best_vs, pct_gemm and the
    summary all follow from the rows and the same run's dense GEMM."""
    gemm = data["dense_gemm"]
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["dtype"]) == (bench.GEMM_N,) * 3 + ("fp16",)
    assert gemm["tflops"] == pytest.approx(2 * bench.GEMM_N**3 / (gemm["ms"] * 1e-3) / 1e12, rel=1e-9)
    timed = [r for r in data["rows"] if r["ms"] is not None]
    ladder = [r for r in timed if bench.is_ladder(r["implementation"])]
    best = max(ladder, key=lambda r: r["tflops"])
    summary = data["summary"]
    assert summary["best_version"] == best["implementation"] and summary["best_tflops"] == best["tflops"]
    assert summary["dense_gemm_tflops"] == gemm["tflops"]
    assert summary["best_pct_gemm"] == pytest.approx(100 * best["tflops"] / gemm["tflops"])
    for r in timed:
        assert r["best_vs"] == pytest.approx(best["tflops"] / r["tflops"])
        assert r["pct_gemm"] == pytest.approx(100 * r["tflops"] / gemm["tflops"])
        assert 0 <= r["max_err"] < 1, r  # randn inputs: |o| < a few; an fp16 kernel is off by ~1e-3
        if bench.is_ladder(r["implementation"]):
            continue
        if r["implementation"] in summary.get("suspect", {}):  # a fallback timed: no ratio against it
            assert r["implementation"] not in summary["best_vs"]
        else:
            assert summary["best_vs"][r["implementation"]] == pytest.approx(r["best_vs"])


def test_write_result_atomic_and_no_overwrite(tmp_path):
    rows = [bench._finite({"implementation": "x", "shape": "s", "ms": 1.0, "tflops": 2.0, "rel_err": math.inf,
                           "snr_db": -math.inf, "note": ""})]
    assert rows[0]["rel_err"] is None and rows[0]["snr_db"] is None
    jpath, cpath = bench.write_result(tmp_path, "2026-01-01-b1_h1_s1_d64_fp16", {"gpu": "g"}, rows)
    assert json.loads(jpath.read_text())["rows"] == rows
    assert cpath.read_text().splitlines()[0].startswith("implementation,shape,ms,tflops,rel_err,snr_db")
    before = jpath.read_text()
    with pytest.raises(WhowaitsError, match="exists; pass --force"):
        bench.write_result(tmp_path, "2026-01-01-b1_h1_s1_d64_fp16", {"gpu": "other"}, [])
    assert jpath.read_text() == before
    bench.write_result(tmp_path, "2026-01-01-b1_h1_s1_d64_fp16", {"gpu": "other"}, [], force=True)
    assert json.loads(jpath.read_text())["provenance"] == {"gpu": "other"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [cpath.name, jpath.name]  # no temp files left


def test_gpu_slug():
    assert bench.gpu_slug("NVIDIA H200") == "h200"
    assert bench.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"


def test_method_in_docstring():
    doc = bench.__doc__
    for word in ("CUDA events", "median", "L2", "randn", "float64", "same process"):
        assert word in doc


def _cli(*args):
    from clirun import whowaits

    return whowaits(*args)


def test_cli_bench_bad_input_is_one_line():
    for args in (["bench", "v99"], ["bench", "v01", "--shape", "b1_h1"]):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("whowaits: error: ")


SEED_FIXTURE = REPO / "reports/h200/bench/2026-12-01-b1_h64_s1024_d128_fp16.json"  # the 08:16 device run


def _fixture_rows():
    data = json.loads(SEED_FIXTURE.read_text())
    fields = set(bench.BenchRow.__dataclass_fields__)
    return data, [bench.BenchRow(**{k: v for k, v in r.items() if k in fields}) for r in data["rows"]]


def test_seed_fixture_is_a_real_device_run():
    data, rows = _fixture_rows()
    assert "H200" in data["provenance"]["gpu"] and data["provenance"]["repeat"] == 3
    names = [r.implementation for r in rows]
    assert "flex-attention" in names and "v13_persistent" in names and "flashinfer" not in names  # not installed
    assert data["summary"]["best_version"] == "v13_persistent"
    # summarize() on the stored rows gives the stored summary back
    again = bench.summarize(rows, data["dense_gemm"])
    assert again["best_version"] == data["summary"]["best_version"]
    assert again["best_vs"] == pytest.approx(data["summary"]["best_vs"])


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_cli_bench_seed_columns(fmt, monkeypatch, tmp_path):
    # the CLI's rendering of a real run (bench.run replaced by the stored rows: no GPU)
    data, rows = _fixture_rows()
    shape = Shape.parse(data["rows"][0]["shape"])
    monkeypatch.setattr(bench, "run", lambda *a, **k: [(shape, rows, tmp_path / "x.json")])
    proc = _cli("bench", "--shape", shape.key, "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    seed = ["ms", "tflops", "snr_db", "max_err", "best_vs", "pct_gemm"]
    if fmt == "csv":
        out = list(csv.DictReader(proc.stdout.splitlines()))
        assert set(seed) <= set(out[0]) and [r["implementation"] for r in out] == [r.implementation for r in rows]
        v13 = next(r for r in out if r["implementation"] == "v13_persistent")
        assert float(v13["best_vs"]) == pytest.approx(1.0)
    elif fmt == "json":
        out = json.loads(proc.stdout)
        assert all(set(seed) <= set(r) for r in out)
        cudnn = next(r for r in out if r["implementation"] == "sdpa-cudnn")
        assert cudnn["best_vs"] == pytest.approx(data["summary"]["best_vs"]["sdpa-cudnn"])
    else:
        for word in ("best_vs", "pct_gemm", "max_err", "flex-attention", "v13_persistent"):
            assert word in proc.stdout, word
