"""The steady state's dips (``profiler.analyze.timeline.dips``): properties on every committed report with PM
sampling, the period of a persistent kernel's rounds, a hand check of one dip, and where dips travel (diff,
migration, the CLI).

The physics the period test rests on: a persistent kernel (one CTA per SM, each walking tiles) whose CTAs start
together runs its tiles in rounds of ``grid`` tiles, and every CTA passes a tile boundary at about the same time,
so the tensor pipe dips once per round: ``ceil(tiles / grid) - 1`` dips inside the kernel, one every
``duration / (tiles / grid)`` or so (the ramp and the tail take a part of the duration, hence the 20% band).
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT
from test_timeline import run_cli
from profiler.analyze.timeline import (DIP_BASELINE_SAMPLES, DIP_FRACTION, DIP_PERIOD_MIN, DIP_RISE, DIP_RISERS,
                                       timeline)

H200 = ROOT / "reports/h200"
SUBJECTS = sorted({*H200.glob("v*/b1_h64_s1024_d128_fp16.ncu-rep"), *H200.glob("v*/b4_h16_s4096_d128_fp16.ncu-rep"),
                   *H200.glob("ext-*/*.ncu-rep"), *H200.glob("zoo/*/*.ncu-rep")})


def _launch(path):
    from profiler.report import load_report

    return load_report(path).launches[0]


@pytest.mark.parametrize("path", SUBJECTS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_dips_properties(path):
    """Every dip lies inside the steady phase, in order and apart; at least one of its samples fell under
    DIP_FRACTION of its level; its deficit is the samples' shortfall (recomputed here from the series); the
    shares add up; the risers are ordered ratios from DIP_RISE on; a period only from DIP_PERIOD_MIN dips on."""
    t = timeline(_launch(path))
    if t["phases"] is None:
        assert t["dips"] is None and t["dip_share"] is None and t["dip_period_ns"] is None
        return
    steady = next(p for p in t["phases"] if p["name"] == "steady")
    times = np.array(t["t_ns"], dtype=float)
    act = np.array(t["series"][t["activity"]], dtype=float)
    interval = float(np.median(np.diff(times)))
    end_prev = -1.0
    for d in t["dips"]:
        assert steady["start_ns"] <= d["start_ns"] < d["end_ns"] <= steady["end_ns"] + 1e-6
        assert d["start_ns"] > end_prev
        end_prev = d["end_ns"]
        inside = (times > d["start_ns"] + 1e-6) & (times <= d["end_ns"] + 1e-6)
        assert inside.sum() == d["samples"] >= 1
        assert d["min_pct"] == pytest.approx(act[inside].min())
        assert d["min_pct"] < DIP_FRACTION * d["level"]
        want = np.clip(d["level"] - act[inside], 0, None).sum() / d["level"] * interval
        assert d["deficit_ns"] == pytest.approx(want, rel=1e-9, abs=1e-9)
        assert 0 <= d["deficit_ns"] <= d["end_ns"] - d["start_ns"] + 1e-6
        assert d["share"] == pytest.approx(d["deficit_ns"] / t["duration_ns"])
        ratios = list(d["rose"].values())
        assert len(ratios) <= DIP_RISERS and all(r >= DIP_RISE for r in ratios) and ratios == sorted(ratios, reverse=True)
        assert t["activity"] not in d["rose"]
    assert t["dip_share"] == pytest.approx(sum(d["share"] for d in t["dips"]))
    assert 0 <= t["dip_share"] < 1
    if len(t["dips"]) < DIP_PERIOD_MIN:
        assert t["dip_period_ns"] is None
    else:
        centres = np.array([(d["start_ns"] + d["end_ns"]) / 2 for d in t["dips"]])
        assert np.diff(centres).min() <= t["dip_period_ns"] <= np.diff(centres).max()


# (version, shape, tiles): 128-row query tiles; the seed shape has 64 heads x 8, b4_h16_s4096 has 64 x 32
PERSISTENT = [(v, s, tiles) for v in ("v21_causal_pairs", "v34_q_regs", "v36_warp_epilogue_only",
                                      "v42_whole_head_rounds", "v43_warp_epilogue_whole_heads")
              for s, tiles in (("b1_h64_s1024_d128_fp16", 512), ("b4_h16_s4096_d128_fp16", 2048))]


@pytest.mark.parametrize("version,shape,tiles", PERSISTENT, ids=lambda x: str(x))
def test_dip_period_is_the_time_of_a_round(version, shape, tiles):
    """Persistent rungs: the dips come once a round. At the seed shape (3.88 rounds on 132 CTAs, 4 on 128)
    every round boundary is a dip: exactly ceil(rounds) - 1 of them. At b4 (15.5 rounds) the CTAs drift apart
    over the kernel and the later boundaries blur into the steady level, so at least the first few show, and
    their period is still the round's time."""
    path = H200 / version / f"{shape}.ncu-rep"
    if not path.exists():
        pytest.skip(f"no committed report {path.relative_to(ROOT)}")
    la = _launch(path)
    t = timeline(la)
    grid = int(la.value("launch__grid_size"))
    rounds = tiles / grid
    round_ns = t["duration_ns"] / rounds
    assert t["dip_period_ns"] is not None, t["dips"]
    assert abs(t["dip_period_ns"] - round_ns) / round_ns < 0.2, (t["dip_period_ns"], round_ns)
    if tiles == 512:
        assert len(t["dips"]) == math.ceil(rounds) - 1
        assert all(d["rose"].get("dram_pct", 0) >= DIP_RISE for d in t["dips"])  # the boundary's O stores and new Q
    else:
        assert DIP_PERIOD_MIN <= len(t["dips"]) <= math.ceil(rounds) - 1


def test_one_dip_by_hand():
    """v34 at the seed shape, its first round boundary. ncu's tensor-pipe samples there (``whowaits timeline
    --format csv``, each covering the 1.5 us before its time): 16.5 us 79.0, 18.0 us 73.1, 19.5 us 33.9,
    21.0 us 80.7, 22.5 us 81.6; the calm steady samples within three of them read 81.4-82.1 (median 81.9).
    The smoothed series (a 3-sample mean) is under 90% of the rolling level at 18.0, 19.5 and 21.0 us; widened
    by one sample each side, the dip is 16.5-22.5 us (it starts where the 16.5 us sample's interval does, at
    15.0 us), lowest 33.9, and it lost (81.9 - 79.0 + 81.9 - 73.1 + 81.9 - 33.9 + 81.9 - 80.7 + 81.9 - 81.6)
    / 81.9 x 1.5 us = 1.12 us."""
    t = timeline(_launch(H200 / "v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep"))
    d = t["dips"][0]
    assert (d["start_ns"], d["end_ns"], d["samples"]) == (15008.0, 22496.0, 5)
    assert d["min_pct"] == pytest.approx(33.9, abs=0.05)
    assert d["level"] == pytest.approx(81.9, abs=0.1)
    assert d["deficit_ns"] / 1e3 == pytest.approx(1.12, abs=0.01)
    assert DIP_BASELINE_SAMPLES == 3


def test_dips_travel_to_diff_migration_and_the_cli(monkeypatch, capsys):
    from profiler.analyze import summarize
    from profiler.compare.diff import diff

    a = summarize(H200 / "v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep")[0]
    b = summarize(H200 / "ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep")[0]
    d = diff(a, b, "v34", "cudnn")
    row = d.phases.set_index("phase").loc["dips"]
    assert row["share_a"] == pytest.approx(a["timeline"]["dip_share"]) and a["timeline"]["dip_count"] == 3
    assert row["duration_ns_b"] == pytest.approx(b["timeline"]["dip_share"] * b["timeline"]["duration_ns"])
    # a summary made before dips (no dip_share): the row is there, unknown, never significant
    old = {**a, "timeline": {k: v for k, v in a["timeline"].items() if k not in ("dip_share", "dip_count")}}
    row = diff(old, b, "old", "cudnn").phases.set_index("phase").loc["dips"]
    assert pd.isna(row["share_a"]) and pd.isna(row["significant"])

    path = H200 / "v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep"
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", path)
    assert code == 0 and "Dips in the steady state" in out and "3 dips lost" in out
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", path, "--format", "json")
    assert code == 0 and len(json.loads(out)[0]["dips"]) == 3
    code, out, _ = run_cli(monkeypatch, capsys, "timeline", path, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and sum(r["record"] == "dip" for r in rows) == 3
    assert {r["name"] for r in rows if r["record"] == "summary"} >= {"dip_share", "dip_period_ns"}


@pytest.mark.parametrize("path", SUBJECTS + sorted((ROOT / "tests/public-reports").glob("*/*.ncu-rep")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_phases_come_from_the_tensor_pipe_only_where_mma_runs(path):
    """The activity series is the tensor pipe's only for a kernel that executes MMA instructions (where the report
    counts them): ncu's tensor-pipe counter reads a few % on Hopper for elementwise kernels that execute none
    (a public H100 SiLU report: 3%), and phases taken from that noise would be noise."""
    from profiler.analyze.timeline import TENSOR_USED_PCT, mma_executed
    from profiler.report import load_report

    for la in load_report(path).launches:
        t = timeline(la)
        if t["activity"] is None:
            continue
        mma = mma_executed(la)
        tensor = t["series"].get("tensor_pct") or []
        if mma == 0:
            assert t["activity"] != "tensor_pct"
        elif mma and tensor and max(tensor) >= TENSOR_USED_PCT:
            assert t["activity"] == "tensor_pct"
