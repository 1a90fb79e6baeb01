"""Every view on real reports from other GPUs (tests/public-reports/: an RTX 2080 Ti and an RTX 2060 Max-Q
(Turing), an A10G, an A100, an A40 and an RTX 3070 (Ampere), an RTX 4070 Laptop GPU (Ada) and an H800 (Hopper);
ncu 2020.3 to 2024.3; ncu's default set, SpeedOfLight only, --set full; CUDA C, CUTLASS, PyTorch and Julia
kernels; 1 to 8 launches each, two of them with launches ncu left as NaN). whowaits' numbers are held equal to
ncu's own output for the same files (tests/golden/public/: `ncu --import F --page raw|source --csv`, ncu 2025.3.1
on the H200 machine)."""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "tests" / "public-reports"
GOLDEN = ROOT / "tests" / "golden" / "public"
REPORTS = sorted(PUBLIC.glob("*/*.ncu-rep"))
GENERATIONS = {"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.9": "Ada", "9.0": "Hopper"}


def _stem(report: Path) -> str:
    return f"{report.parent.name}__{report.name[: -len('.ncu-rep')]}"


@lru_cache(maxsize=None)
def raw(report: Path) -> list[dict]:
    """ncu's raw page: one {metric: (unit, text)} per launch."""
    rows = list(csv.reader(open(GOLDEN / f"{_stem(report)}.raw.csv", newline="")))
    head, units = rows[0], rows[1]
    return [{h: (u, v) for h, u, v in zip(head, units, r)} for r in rows[2:]]


@lru_cache(maxsize=None)
def summaries(report: Path) -> list[dict]:
    from profiler.analyze import summarize

    return summarize(report)


def _num(text: str) -> float | None:
    t = text.replace(",", "").strip()
    if t in ("", "n/a") or t.lower().endswith("nan"):
        return None
    return float(t)


def _base(name: str) -> str:
    """``void at::native::<unnamed>::distribution_kernel<…>(…)`` -> ``distribution_kernel``."""
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    return re.split(r"[<(]", name)[0].split("::")[-1].split()[-1]


_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def test_at_least_three_generations():
    gens = {GENERATIONS[summaries(r)[0]["device"]["cc"]] for r in REPORTS}
    assert gens >= {"Turing", "Ampere", "Ada", "Hopper"}
    for r in REPORTS:  # each folder keeps its licence (under the name its repository gives it)
        assert any((r.parent / n).is_file() for n in ("LICENSE", "LICENSE.txt", "LICENSE.md")), r.parent


@pytest.mark.parametrize("report", REPORTS, ids=_stem)
def test_launches_duration_and_shape_equal_ncu(report):
    ours, theirs = summaries(report), raw(report)
    assert len(ours) == len(theirs)
    for s, g in zip(ours, theirs):
        # ncu's raw page prints the full demangled name (namespaces, "(int)128"); whowaits the report's
        # demangled name: the function before its template/argument list is the same
        assert _base(s["kernel"]) == _base(g["Kernel Name"][1])
        unit, text = g["gpu__time_duration.sum"]
        want = _num(text)
        if want is None:  # ncu itself has no value (a launch it could not profile): null, never 0
            assert s["duration_ns"] is None
            assert s["launch"]["grid"] is None
            continue
        # equal at the precision ncu prints (a 1.17 s launch reads "1.168078" second: to the microsecond)
        decimals = len(text.split(".")[1]) if "." in text else 0
        assert abs(s["duration_ns"] - want * _NS[unit]) <= max(0.5 * 10**-decimals * _NS[unit], 1e-9 * want * _NS[unit])
        assert tuple(s["launch"]["grid"]) == tuple(int(x) for x in g["Grid Size"][1].strip("()").split(","))
        assert tuple(s["launch"]["block"]) == tuple(int(x) for x in g["Block Size"][1].strip("()").split(","))
        assert s["launch"]["registers_per_thread"] == _num(g["launch__registers_per_thread"][1])


@pytest.mark.parametrize("report", REPORTS, ids=_stem)
def test_stall_samples_equal_ncu(report):
    """Kernel-level sampled stalls per reason equal ncu's smsp__pcsamp_warps_issue_stalled_<reason>; a reason
    ncu does not have for the chip (warpgroup_arrive before Hopper) is null, never a number in a sum."""
    checked = 0
    for s, g in zip(summaries(report), raw(report)):
        for reason, v in s["stall_samples"].items():
            key = f"smsp__pcsamp_warps_issue_stalled_{reason}"
            want = _num(g[key][1]) if key in g else None
            if want is None:
                assert v is None, (reason, v)
            else:
                assert v == want, (reason, v, want)
                checked += 1
    sampled = any(k.startswith("smsp__pcsamp_warps_issue_stalled_") for k in raw(report)[0])
    assert (checked > 0) == sampled
    for s, g in zip(summaries(report), raw(report)):  # source regions add up to ncu's sample count
        if s.get("regions"):
            assert sum(r["samples"] for r in s["regions"]) == _num(g["smsp__pcsamp_sample_count"][1])


SOURCE_PAGES = [r for r in REPORTS if (GOLDEN / f"{_stem(r)}.source.csv").is_file()]


@pytest.mark.parametrize("report", SOURCE_PAGES, ids=_stem)
def test_per_pc_samples_equal_ncu_source_page(report):
    """Each report with ncu's source page exported (the A100 CUTLASS kernel, the RTX 4070's, the A40 Julia kernel,
    the ncu 2020.3 RTX 3070 scan): for its first launch, whowaits' who-waits cells sum to ncu's per-instruction
    warp-stall sampling column (all samples), and the top instruction's samples are ncu's for that PC."""
    rows = list(csv.reader(open(GOLDEN / f"{_stem(report)}.source.csv", newline="")))
    head = rows[1]
    block = []
    for r in rows[2:]:
        if r and r[0] == "Kernel Name":
            break
        block.append(dict(zip(head, r)))
    # the column's name follows the report's metrics: ncu 2020.3 "Sampling Data (All)", 2022.4 "... (All Cycles)"
    col = next(c for c in ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)",
                           "Sampling Data (All)") if c in head)
    per_pc = {int(r["Address"], 16): int(r[col]) for r in block}
    s = summaries(report)[0]
    assert sum(c["samples"] for c in s["who_waits"]) == sum(per_pc.values())
    base = min(per_pc)
    top = s["top_instructions"][0]
    assert per_pc[base + top["offset"]] == top["samples"]
    assert top["samples"] == max(per_pc.values())


def test_every_view_on_every_report(tmp_path):
    """migration (table, json), diff and the HTML report over all public reports at once: no exception, no
    'None' in the page, one missing-data note per report, none naming a reason the chip lacks."""
    from profiler.compare import diff, load_versions, migrate
    from profiler.compare.confound import confounds
    from profiler.html import render_report

    profiled = load_versions([str(r) for r in REPORTS])
    labels = [p.label for p in profiled]
    assert len(set(labels)) == len(labels) and all(len(lb) < 30 for lb in labels), labels
    m = migrate(profiled=profiled)
    # launches ncu recorded nothing for (RTX 4070 launch 1, H800 launch 4) are left out of the merge, said once
    assert all(d is not None for d in m.table["duration_ns"]), list(m.table["duration_ns"])
    left = [n for n in m.notes if "left out: ncu recorded no values" in n]
    assert len(left) == 2 and any("launch 1 (biAStarMultipleBucketsSingleKernel)" in n for n in left)
    assert any("launch 4 (flash_fwd_kernel)" in n for n in left)
    h800 = next(p for p in profiled if p.label.startswith("h800"))
    assert h800.launches == 4 and h800.summary["duration_ns"] == pytest.approx(16448 + 3232 + 33504 + 33952)
    gap_notes = [n for n in m.notes if "needs ncu section" in n]
    assert len(gap_notes) <= len(REPORTS)  # one per report at most (reports lacking the same share a line)
    assert not any("warpgroup_arrive" in n for n in m.notes)
    assert set(m.stall_shares["version"]) <= set(labels)
    ampere = [p.label for p in profiled if p.summary.get("device", {}).get("cc", "").startswith("8")]
    assert not ((m.stall_shares["reason"] == "warpgroup_arrive") & m.stall_shares["version"].isin(ampere)
                & (m.stall_shares["samples"] > 0)).any()
    diffs = [diff(x.summary, y.summary, x.label, y.label, warnings=confounds([x, y]))
             for x, y in zip(profiled, profiled[1:])]
    import json

    json.loads(json.dumps(m.to_dict(), default=str), parse_constant=_no_nan)  # what --format json prints
    for d in diffs:
        json.loads(json.dumps(d.to_dict(), default=str), parse_constant=_no_nan)
    page = render_report(m, profiled, diffs)
    assert ">None<" not in page and "nan%" not in page


def test_show_says_missing_once_per_launch():
    from typer.testing import CliRunner

    from profiler.cli import app

    rep = PUBLIC / "esmm-research" / "a10g-sgemm-default-set.ncu-rep"
    res = CliRunner().invoke(app, ["show", str(rep)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note:")]
    assert len(notes) == 4  # four launches, one line each
    assert all("no stall sampling" in n and "WarpStateStats" in n and "--verbose" in n for n in notes)
    res = CliRunner().invoke(app, ["show", str(rep), "--verbose"], env={"COLUMNS": "400"})
    fields = [ln for ln in res.output.splitlines() if ln.startswith("note: launch 0:   ")]
    assert any("stall_samples.long_scoreboard ← WarpStateStats" in f for f in fields)
    assert not any("warpgroup_arrive" in f for f in fields)  # an A10G has no such reason: not a gap


def _no_nan(c):
    raise ValueError(f"{c} in JSON output")


@pytest.mark.parametrize("report", REPORTS, ids=_stem)
def test_show_every_format_on_every_report(report):
    """`show` as table, strict JSON (no NaN) and CSV on every public report, in this process."""
    import json

    from typer.testing import CliRunner

    from profiler.cli import app

    run = CliRunner()
    res = run.invoke(app, ["show", str(report), "--format", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout, parse_constant=_no_nan)
    assert len(got) == len(raw(report))
    for fmt in ("csv", "table"):
        res = run.invoke(app, ["show", str(report), "--format", fmt], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
