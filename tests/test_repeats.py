"""Repeated launches of one piece of work (ncu without ``-c 1`` on a loop) are compared by one of them, not by
their sum (``profiler.compare.subjects.repeats``); durations print without exponents (``fmt_ns``, ``fmt_ratio``);
``roles`` says why a report without stall sampling has no edges.

The repeats are real launches: a committed report's launch summary, repeated as ncu would record a loop (the
same kernel, grid and block, durations within REPEAT_SPREAD), and the public H800 report, whose three
``distribution_elementwise_grid_stride_kernel`` launches share a grid but not their work (16.4 / 33.5 / 34.0 us: a
grid-stride kernel keeps its grid for any size), which must stay summed."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import ROOT
from profiler.compare.diff import fmt_ns, fmt_ratio
from profiler.compare.subjects import REPEAT_SPREAD, Profiled, Subject, match_launches, repeats, resolve, load_many

SEED = ROOT / "reports/h200/v34_q_regs/b1_h64_s1024_d128_fp16.ncu-rep"
H800 = ROOT / "tests/public-reports/sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep"


def _loop(summary: dict, times: list[float]) -> list[dict]:
    out = []
    for i, t in enumerate(times):
        s = copy.deepcopy(summary)
        s["launch_index"], s["launch_indices"], s["duration_ns"] = i, [i], t
        out.append(s)
    return out


@pytest.fixture(scope="module")
def seed():
    return load_many(resolve([str(SEED)]))[0].summary


def test_three_repeats_against_one_launch_compare_one_to_one(seed):
    d = seed["duration_ns"]
    a = Profiled(Subject("one", SEED), seed, 1, parts=[seed])
    parts = _loop(seed, [d * 1.02, d, d * 0.99])
    b = Profiled(Subject("three", SEED), parts[0], 3, parts=parts)
    match_launches([a, b])
    assert b.launches == 1 and b.summary["duration_ns"] == d and b.parts[0]["launch_index"] == 1
    assert any("3 launches are 3 repeats of the same launch" in n and "not their sum" in n for n in b.meta["left_out"])
    assert not any("summed" in n for n in b.meta["left_out"])


def test_what_is_not_a_repeat_stays_summed(seed):
    d = seed["duration_ns"]
    spread = _loop(seed, [d, d * (1 + 2 * REPEAT_SPREAD)])  # the same grid, other work
    assert repeats(spread) is None
    uneven = _loop(seed, [d, d, d])
    uneven[2]["kernel"] = "void other_kernel(int)"  # two launches of one kernel, one of another: not a loop
    assert repeats(uneven) is None
    pair = _loop(seed, [d, d / 2, d * 1.01, d / 2 * 0.99])
    for k in (1, 3):
        pair[k]["kernel"] = "void other_kernel(int)"
    kept = repeats(pair)  # a loop of two kernels, twice: one of each
    assert kept is not None and [s["launch_index"] for s in kept] == [1, 2]  # the upper median of each pair
    p = load_many(resolve([str(H800)]))[0]
    assert p.launches == 4 and repeats(p.parts) is None
    assert any("4 launches summed" in n for n in p.meta["left_out"])


def test_durations_and_ratios_never_print_an_exponent():
    assert [fmt_ns(v) for v in (999, 999.6, 999_499, 999_500, 4.65e6, 1.168e9, 5e12)] == [
        "999 ns", "1 µs", "999 µs", "1 ms", "4.65 ms", "1.17 s", "5,000 s"]
    assert [fmt_ratio(v) for v in (1.234, 25.95, 999.4, 9080.2)] == ["1.23x", "25.9x", "999x", "9,080x"]
    assert fmt_ratio(9080.2, 2) == "9,080x" and fmt_ratio(5.96, 2) == "6x"


def test_roles_without_stall_sampling_say_which_section(monkeypatch, capsys):
    from test_timeline import run_cli

    report = ROOT / "tests/public-reports/esmm-research/a10g-sgemm-default-set.ncu-rep"  # ncu's default set
    code, out, _ = run_cli(monkeypatch, capsys, "roles", report, "--format", "json")
    got = json.loads(out)
    assert code == 0 and got and all(g["missing"] and {m["section"] for m in g["missing"]} == {"SourceCounters"}
                                      and g["total_samples"] == 0 for g in got)
    code, out, _ = run_cli(monkeypatch, capsys, "roles", report)
    assert code == 0 and out.count("needs ncu's SourceCounters section") == len(got)
    code, out, _ = run_cli(monkeypatch, capsys, "roles", SEED, "--format", "json")
    assert code == 0 and json.loads(out)[0]["missing"] == []


def test_a_report_sharing_no_kernel_is_named_when_matching_stops():
    """Launches are matched by kernel name only when every report has the name: the two CUTLASS A100 reports
    share theirs, the A10G SGEMM report shares none, so with it nothing is matched, and the note says which
    report turned matching off (the sweep's 26x -> 18x step came from such a third report, unannounced)."""
    pub = ROOT / "tests/public-reports"
    two = load_many(resolve([str(pub / "cutlass-panjd123/report-s4.ncu-rep"), str(pub / "cutlass-panjd123/report-s8.ncu-rep")]))
    assert not any("no kernel is common" in n for p in two for n in p.meta.get("left_out", []))
    three = load_many(resolve([str(pub / "cutlass-panjd123/report-s4.ncu-rep"), str(pub / "cutlass-panjd123/report-s8.ncu-rep"),
                               str(pub / "esmm-research/a10g-sgemm-default-set.ncu-rep")]))
    notes = [n for p in three for n in p.meta.get("left_out", []) if "no kernel is common" in n]
    assert len(notes) == 1 and "a10g-sgemm-default-set shares no kernel with the others" in notes[0]
