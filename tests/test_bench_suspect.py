"""Suspect bench rows: a fused baseline that timed a fallback path, not its kernel (kernels.bench.suspect_rows).

The case that made the rule: FlexAttention compiled for a ninth shape in one process hit dynamo's recompile
limit (8) and ran its unfused math path: 61.3 ms, 4.5 TFLOPS at b4_h32_s4096_d64_fp16_causal in the committed
2026-12-03 T0414 and T0519 runs, beside 440 TFLOPS for v32 and 416-431 for cuDNN (the device log of T0519,
reports/h200/ladder4/2026-12-03T0519/bench.txt, shows dynamo's "hit config.recompile_limit (8)" warning and
flex_attention's "called without torch.compile()" one). Every committed bench file is a subject.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels import bench
from profiler.check.inputs import read_bench

REPO = Path(__file__).resolve().parent.parent
BENCH_FILES = sorted((REPO / "reports").glob("*/bench/*.json"))
FALLBACK_RUNS = {"2026-12-03T0414-b4_h32_s4096_d64_fp16_causal.json", "2026-12-03T0519-b4_h32_s4096_d64_fp16_causal.json"}


def _tflops(path: Path) -> dict[str, float | None]:
    return {r["implementation"]: r.get("tflops") for r in json.loads(path.read_text())["rows"]}


def test_the_eager_flex_rows_are_the_only_suspects():
    flagged = {p.name: bench.suspect_rows(_tflops(p)) for p in BENCH_FILES}
    assert {name for name, s in flagged.items() if s} == FALLBACK_RUNS
    for name in FALLBACK_RUNS:
        assert set(flagged[name]) == {"flex-attention"}
        assert "1/98 of v32_l2_prefetch_d64" in flagged[name]["flex-attention"]


@pytest.mark.parametrize("path", BENCH_FILES, ids=[p.name for p in BENCH_FILES])
def test_the_rule_on_every_committed_file(path):
    tflops = _tflops(path)
    timed = {n: t for n, t in tflops.items() if t}
    top = max(timed.values())
    suspect = bench.suspect_rows(tflops)
    for name, t in timed.items():
        slow = t * bench.SUSPECT_FACTOR < top
        # ladder rows and the unfused baselines may be that slow by design (v01_naive, sdpa-math): never suspect
        assert (name in suspect) == (slow and name in bench.FUSED_BASELINES), (name, t, top)
    # the gate reads the file without its suspects; every other row is there as written
    b = read_bench(path)
    assert b.suspect == suspect
    assert set(b.rows) == set(tflops) - set(suspect)
    assert all(b.row(n) is None for n in suspect)


def test_summarize_leaves_a_suspect_row_out_of_every_ratio():
    path = REPO / "reports/h200/bench/2026-12-03T0519-b4_h32_s4096_d64_fp16_causal.json"
    fields = set(bench.BenchRow.__dataclass_fields__)
    rows = [bench.BenchRow(**{k: v for k, v in r.items() if k in fields}) for r in json.loads(path.read_text())["rows"]]
    summary = bench.summarize(rows, None)
    assert set(summary["suspect"]) == {"flex-attention"}
    assert "flex-attention" not in summary["best_vs"]
    assert summary["best_vs"]["sdpa-cudnn"] == pytest.approx(440.148307096251 / 430.5731703212921)
    assert summary["cudnn_best"]["implementation"] == "sdpa-cudnn"
    # a run without a fallback keeps every baseline's ratio
    clean = [r for r in rows if r.implementation != "flex-attention"]
    assert "suspect" not in bench.summarize(clean, None)


def test_the_gate_never_sees_the_suspect_row_and_keeps_the_others():
    b = read_bench(REPO / "reports/h200/bench/2026-12-03T0519-b4_h32_s4096_d64_fp16_causal.json")
    assert b.row("flex-attention") is None  # a min_ratio against flex then looks for an older run that has it
    assert b.row("cudnn-best")["implementation"] == "sdpa-cudnn"
    assert b.row("v32_l2_prefetch_d64")["tflops"] == pytest.approx(440.148307096251)
