"""`whowaits bench --repeat N` / `--compare PREV.json` without a GPU: the round bookkeeping on the committed
bench rows, the noise-aware verdicts (Student t on the per-round medians), and the CLI's error paths."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict
from pathlib import Path

import pytest

from kernels import bench
from kernels.config import Shape
from profiler.check import inputs, timing

REPO = Path(__file__).resolve().parent.parent
B1 = "b1_h64_s1024_d128_fp16"
# pinned: the hand computation below is for this file's 13 rows (later bench files hold more rungs), and it
# is a ONE-round run (the 2026-12-01 bench has three rounds): these tests compare one round to three
COMMITTED = REPO / "reports" / "h200" / "bench" / f"2026-11-30-{B1}.json"


def committed_rows() -> list[dict]:
    return json.loads(COMMITTED.read_text())["rows"]


@pytest.mark.parametrize("df, t", [(1, 12.706), (2, 4.303), (4, 2.776), (10, 2.228), (30, 2.042)])
def test_t_quantiles_match_the_table(df, t):
    # two-sided 95% Student t quantiles, as printed in every statistics table
    assert timing.t_quantile(0.05, df) == pytest.approx(t, abs=1e-3)


def test_apply_rounds_on_committed_rows(tmp_path):
    """Three rounds per row, built from each committed row's own min/median/p90 scaled by 0.99/1/1.01:
    ms_runs are the round medians, ms/ms_min/ms_p90/tflops come from the pooled reps."""
    shape = Shape.parse(B1)
    rows = []
    for r in committed_rows():
        row = bench.BenchRow(**{k: v for k, v in r.items() if k in bench.BenchRow.__dataclass_fields__})
        if row.ms is None:
            rows.append(row)
            continue
        runs = [sorted(t * f for t in (r["ms_min"], r["ms"], r["ms_p90"])) for f in (0.99, 1.0, 1.01)]
        bench.apply_rounds(row, runs, shape)
        assert row.ms_runs == pytest.approx([r["ms"] * f for f in (0.99, 1.0, 1.01)])
        assert row.ms == statistics.median([t for run in runs for t in run])  # pooled, not a median of medians
        assert row.ms_min == pytest.approx(0.99 * r["ms_min"]) and row.reps == 9
        assert row.ms_min <= row.ms <= row.ms_p90
        assert row.tflops == pytest.approx(shape.flops() / (row.ms * 1e-3) / 1e12)
        rows.append(row)
    path, _ = bench.write_result(tmp_path, f"2026-12-01-{B1}", {"gpu": "NVIDIA H200", "repeat": 3},
                                 [bench._finite(asdict(r)) for r in rows])
    again = inputs.read_bench(path)
    assert again.rows["v07_tuned"]["ms_runs"] == pytest.approx(rows[6].ms_runs)
    # the CSV keeps its columns (ms_runs lives in the JSON only)
    assert path.with_suffix(".csv").read_text().splitlines()[0] == ",".join(bench.CSV_COLUMNS)


def test_compare_committed_against_repeated(tmp_path):
    """The committed file (one round) against a copy with three rounds (±1%) in which v07 is 1.3x slower
    and v06 1.005x: v07 is slower beyond the band, v06 and the rest within noise. (1.2x would not be:
    with one round on one side and 13-15 rows compared, t(2 df) >= 16.1 makes the band over ±20%.)"""
    prev = committed_rows()
    cur = json.loads(json.dumps(prev))
    for r in cur:
        if r["ms"] is None:
            continue
        f = {"v07_tuned": 1.3, "v06_softmax_fusion": 1.005}.get(r["implementation"], 1.0)
        r["ms"] *= f
        r["ms_runs"] = [r["ms"] * j for j in (0.99, 1.0, 1.01)]
    res = {x["implementation"]: x for x in timing.compare_bench(prev, cur)}
    assert len(res) == len(prev)
    # by hand: s = sd(ln 0.99, ln 1, ln 1.01) = 0.0100, df = 2, se = s·sqrt(1/1 + 1/3) = 0.01155;
    # m rows compared (13 in the 2026-11-30 file, 15 in 2026-12-01's): t at alpha 0.05/m with 2 df
    m = sum(1 for r in prev if r["ms"] is not None)
    t = timing.t_quantile(0.05 / m, 2)
    s = statistics.stdev([math.log(0.99), 0.0, math.log(1.01)])
    band = math.exp(t * s * math.sqrt(1 + 1 / 3)) - 1
    assert t >= 16.07 and band > 0.20
    v07 = res["v07_tuned"]
    assert v07["df"] == 2 and v07["spread"] == pytest.approx(s) and v07["band"] == pytest.approx(band)
    assert v07["verdict"] == "slower" and v07["ratio"] == pytest.approx(1.3 * math.exp(statistics.fmean(
        [math.log(0.99), 0.0, math.log(1.01)])))
    assert res["v06_softmax_fusion"]["verdict"] == "within noise"
    assert "slower (beyond the" in timing.verdict_text(v07)
    # without rounds on either side there is no spread to judge by: said so, not guessed
    plain = timing.compare_rows(prev[6], {**prev[6], "ms": prev[6]["ms"] * 1.5})
    assert plain["verdict"] == "no spread" and plain["significant"] is None
    assert "--repeat" in timing.verdict_text(plain)


def _cli(capsys, *args):
    """The console script's :func:`profiler.cli.run` in this process; (exit code, stderr), stdout in ``_cli.out``."""
    from clirun import whowaits

    proc = whowaits(*args)
    _cli.out = proc.stdout
    return proc.returncode, proc.stderr


def test_cli_compare_and_repeat_errors_before_any_gpu_work(tmp_path, capsys):
    code, err = _cli(capsys, "bench", "v07", "--compare", str(tmp_path / "prev.json"))
    assert code == 2 and err.startswith("whowaits: error: no such bench file") and err.count("\n") == 1
    (tmp_path / "bad.json").write_text("[1, 2]")
    code, err = _cli(capsys, "bench", "v07", "--compare", str(tmp_path / "bad.json"))
    assert code == 2 and "not a bench result file" in err
    code, err = _cli(capsys, "bench", "v07", "--compare", str(COMMITTED), "--shape", "b4_h16_s4096_d128_fp16")
    assert code == 2 and "holds shape b1_h64_s1024_d128_fp16, which this run does not bench" in err
    code, err = _cli(capsys, "bench", "v07", "--repeat", "0")
    assert code == 2 and "--repeat must be >= 1" in err


def test_cli_compare_output(tmp_path, capsys, monkeypatch):
    """The CLI's --compare glue, with the GPU run replaced by the committed rows given three rounds
    (v07 1.3x slower): the table and the JSON carry one verdict per row. (bench.run itself needs a GPU.)"""
    shape = Shape.parse(B1)

    def fake_run(names, shapes, **kw):
        assert kw["repeat"] == 3
        rows = []
        for r in committed_rows():
            row = bench.BenchRow(**{k: v for k, v in r.items() if k in bench.BenchRow.__dataclass_fields__})
            if row.ms is not None:
                f = 1.3 if row.implementation == "v07_tuned" else 1.0
                bench.apply_rounds(row, [[row.ms * f * j] * 30 for j in (0.99, 1.0, 1.01)], shape)
            rows.append(row)
        return [(shape, rows, tmp_path / "new.json")]

    monkeypatch.setattr(bench, "run", fake_run)
    code, err = _cli(capsys, "bench", "--repeat", "3", "--compare", str(COMMITTED), "--format", "json")
    assert code == 0, err
    out = json.loads(_cli.out)
    by = {r["implementation"]: r["vs_prev"] for r in out}
    assert by["v07_tuned"]["verdict"] == "slower" and by["v06_softmax_fusion"]["verdict"] == "within noise"
    assert by["v07_tuned"]["n_cur"] == 3 and by["v07_tuned"]["n_prev"] == 1
    monkeypatch.setenv("COLUMNS", "250")
    code, _ = _cli(capsys, "bench", "--repeat", "3", "--compare", str(COMMITTED))
    assert code == 0 and "vs_prev" in _cli.out
    line = next(ln for ln in _cli.out.splitlines() if "v07_tuned" in ln)
    assert "slower (beyond the" in line, line


def test_later_rounds_start_at_another_row():
    """Round r of N starts at row r·n/N, so no row is always timed last in a round (when the card has run
    longest: the 2026-12-02T0002 bench's rounds slowed every row by 4-6%), and every round times every row once."""
    names = [f"r{i}" for i in range(7)]
    rounds = [bench.round_order(names, i, 3) for i in range(3)]
    assert rounds[0] == names  # the first round keeps the given order (its rows are also the correctness pass)
    assert [r[0] for r in rounds] == ["r0", "r2", "r4"]
    assert all(sorted(r) == sorted(names) for r in rounds)
    mean_pos = {n: statistics.mean(r.index(n) for r in rounds) for n in names}
    assert max(mean_pos.values()) - min(mean_pos.values()) <= 3  # same order every round: 6
    assert bench.round_order([], 1, 3) == [] and bench.round_order(["a"], 2, 3) == ["a"]


def test_the_committed_rounds_drift_by_place_in_the_round():
    """What the rotation is for, in the committed data: the 2026-12-02T0002 b4_h16_s4096 bench timed its rows in
    the same order every round; the tensor-core rows after the first slowed from round 1 to round 3 (by 2-10%),
    while v12, first in every round, did not."""
    rows = json.loads((REPO / "reports/h200/bench/2026-12-02T0002-b4_h16_s4096_d128_fp16.json").read_text())["rows"]
    runs = {r["implementation"]: r["ms_runs"] for r in rows if r.get("ms_runs")}
    later = ["v14_cross_tile_qk", "v17_tma_store_o", "v18_desc_iterator_o", "sdpa-cudnn", "sdpa-flash"]
    assert all(1.02 < runs[n][2] / runs[n][0] < 1.11 for n in later), {n: runs[n] for n in later}
    assert runs["v12_intra_wg_overlap"][2] < runs["v12_intra_wg_overlap"][0]
