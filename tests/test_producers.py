"""Who waits on WHOM (profiler.analyze.producers) on the committed real H200 reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.analyze.producers import SCOREBOARD_REASONS, parse_operands, producer_pcs, waits_on
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16.ncu-rep"
VERSIONS = sorted(p.parent.name for p in (ROOT / "reports" / "h200").glob(f"*/{SHAPE}"))


@pytest.fixture(scope="module")
def launches():
    return {v: load_report(ROOT / "reports" / "h200" / v / SHAPE).launches[0] for v in VERSIONS}


@pytest.fixture(scope="module")
def resolved(launches):
    out = {}
    for v, la in launches.items():
        pcs = producer_pcs(la)
        out[v] = (pcs, waits_on(la, pcs))
    return out


# --- the operand parser, on SASS lines taken from the reports ----------------------------------


@pytest.mark.parametrize(
    "sass, reads, writes, sb",
    [
        ("HMMA.16816.F32 R92, R32, R96, R92", {"R32", "R33", "R34", "R35", "R96", "R97", "R92", "R93", "R94", "R95"},
         {"R92", "R93", "R94", "R95"}, None),
        ("HMMA.16816.F32 R100, R40, R148, RZ", {"R40", "R41", "R42", "R43", "R148", "R149"},
         {"R100", "R101", "R102", "R103"}, None),
        ("LDSM.16.M88.4 R96, [R162+0x4000]", {"R162"}, {"R96", "R97", "R98", "R99"}, "short"),
        ("LDSM.16.MT88.4 R8, [R2]", {"R2"}, {"R8", "R9", "R10", "R11"}, "short"),
        ("STS.128 [R153+0x800], R12", {"R153", "R12", "R13", "R14", "R15"}, set(), "short"),
        ("@P1   LDG.E.128.CONSTANT R96, desc[UR6][R136.64]", {"P1", "UR6", "R136", "R137"},
         {"R96", "R97", "R98", "R99"}, "long"),
        ("SHFL.BFLY PT, R3, R2, 0x1, 0x1f", {"R2"}, {"R3"}, "short"),
        ("MUFU.EX2 R5, R4", {"R4"}, {"R5"}, "short"),
        ("FFMA R3, R2, R4, -R5", {"R2", "R4", "R5"}, {"R3"}, None),
        ("IMAD.WIDE.U32 R8, R11, 0x80, R160", {"R11", "R160", "R161"}, {"R8", "R9"}, None),
        ("IADD3 R136, P3, R8, UR8, RZ", {"R8", "UR8"}, {"R136", "P3"}, None),
        ("IADD3.X R137, R11, UR9, RZ, P3, !PT", {"R11", "UR9", "P3"}, {"R137"}, None),
        ("ISETP.GE.AND P1, PT, R84, 0x1, PT", {"R84"}, {"P1"}, None),
        ("FSEL R108, R108, -INF , !P2", {"R108", "P2"}, {"R108"}, None),
        ("@!P0  BRA 0x7f2c297c14d0", {"P0"}, set(), None),
        ("@!PT LDS RZ, [RZ]", set(), set(), "short"),
        ("CS2R R62, SRZ", set(), {"R62", "R63"}, None),
        ("ULDC.64 UR8, c[0x0][0x218]", set(), {"UR8", "UR9"}, None),
        ("LDGSTS.E.BYPASS.128 [R19+0xf000], desc[UR8][R10.64], P5", {"R19", "UR8", "R10", "R11", "P5"}, set(), "long"),
        ("SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR31+0x58], R3", {"UR31", "R3"}, {"P1"}, "long"),
        ("S2R R0, SR_TID.X", set(), {"R0"}, "short"),
    ],
)
def test_parse_operands(sass, reads, writes, sb):
    op = parse_operands(sass)
    assert set(op.reads) == reads
    assert set(op.writes) == writes
    assert op.scoreboard == sb


def test_parser_sees_every_line_of_the_reports(launches):
    """Every SASS line parses; every line with registers names at least one of them."""
    for la in launches.values():
        for text in la.sass["sass"]:
            op = parse_operands(text)
            assert op.base, text


# --- the ladder's stories ---------------------------------------------------------------------


def _share(wo, cls, reason, producer):
    cell = wo[(wo["class"] == cls) & (wo["reason"] == reason)]
    return float(cell[cell["producer_opcode"] == producer]["samples"].sum()), float(cell["samples"].sum())


def test_v03_hmma_waits_on_ldsm(resolved):
    pcs, wo = resolved["v03_tensor_cores"]
    ldsm, cell = _share(wo, "HMMA", "short_scoreboard", "LDSM")
    total_hmma = float(pcs[(pcs["opcode_class"] == "HMMA") & (pcs["reason"] == "short_scoreboard")]["samples"].sum())
    assert ldsm / total_hmma > 0.8
    assert wo.iloc[0][["class", "reason", "producer_opcode"]].tolist() == ["HMMA", "short_scoreboard", "LDSM"]


def test_v01_fp16_long_scoreboard_waits_on_ldg(resolved):
    pcs, wo = resolved["v01_naive"]
    ldg, _ = _share(wo, "FP16", "long_scoreboard", "LDG")
    total = float(pcs[(pcs["opcode_class"] == "FP16") & (pcs["reason"] == "long_scoreboard")]["samples"].sum())
    assert total > 0 and ldg / total > 0.95


def test_cudnn_branch_waits_on_mbarrier_try_wait(resolved):
    _, wo = resolved["ext-sdpa-cudnn"]
    syncs, cell = _share(wo, "BRANCH", "long_scoreboard", "SYNCS")
    assert cell > 0 and syncs / cell > 0.9


@pytest.mark.parametrize("version", VERSIONS)
def test_samples_conserved_and_unresolved_small(version, launches, resolved):
    la = launches[version]
    pcs, wo = resolved[version]
    for reason in SCOREBOARD_REASONS:
        col = f"stall_{reason}"
        if col not in la.sass.columns:
            continue
        total = float(la.sass[col].sum())
        got = float(wo[wo["reason"] == reason]["samples"].sum()) + wo.attrs["unresolved"].get(reason, 0.0)
        assert got == pytest.approx(total, abs=1e-6)
        assert wo.attrs["scoreboard_samples"].get(reason, 0.0) == pytest.approx(total, abs=1e-6)
        # unresolved is reported, and small
        if total:
            assert wo.attrs["unresolved"].get(reason, 0.0) / total < 0.1, (version, reason)
    # weights of one consumer sum to 1
    w = pcs.groupby(["address", "reason"])["weight"].sum()
    assert (abs(w - 1) < 1e-9).all()


@pytest.mark.parametrize("version", VERSIONS)
def test_every_producer_is_a_real_instruction_it_depends_on(version, launches, resolved):
    """Re-parse the texts: the producer sits at its address, is a variable-latency instruction of
    the stall's scoreboard, and writes a register the consumer reads or writes, or reads one the
    consumer writes (cp.async waits: an LDGSTS of the waited group)."""
    la = launches[version]
    pcs, _ = resolved[version]
    text_at = dict(zip(la.sass["address"].astype(int), la.sass["sass"]))
    res = pcs[pcs["producer_address"].notna()]
    assert len(res)
    for r in res.itertuples(index=False):
        assert text_at[int(r.address)] == r.sass
        assert text_at[int(r.producer_address)] == r.producer_sass
        prod, cons = parse_operands(r.producer_sass), parse_operands(r.sass)
        assert prod.scoreboard == SCOREBOARD_REASONS[r.reason]
        if r.dependency == "depbar":
            assert prod.base == "LDGSTS"
        elif r.dependency == "raw":
            assert prod.writes & cons.reads
        elif r.dependency == "waw":
            assert prod.writes & cons.writes
        else:
            assert r.dependency == "war" and prod.reads & cons.writes


def test_summary_and_show_carry_waits_on(launches):
    from profiler.analyze import summarize_launch

    s = summarize_launch(launches["v03_tensor_cores"])
    assert s["waits_on"][0]["class"] == "HMMA" and s["waits_on"][0]["producer_opcode"] == "LDSM"
    assert len(s["waits_on"]) <= 20
    assert set(s["waits_on_unresolved"]) == set(SCOREBOARD_REASONS)
    assert [w["samples"] for w in s["waits_on"]] == sorted((w["samples"] for w in s["waits_on"]), reverse=True)


def test_diff_and_migration_name_the_producer(launches):
    from profiler.analyze import summarize_launch
    from profiler.compare.diff import diff, top_waiter

    a = summarize_launch(launches["v02_smem_tiling"])
    b = summarize_launch(launches["v03_tensor_cores"])
    assert top_waiter(b)["producer"] == "LDSM"
    d = diff(a, b, "v02", "v03")
    assert "HMMA·short_scoreboard on HMMA.16816.F32 ← LDSM" in d.verdict
    row = d.waits_on[(d.waits_on["class"] == "HMMA") & (d.waits_on["producer"] == "LDSM")].iloc[0]
    assert row["samples_a"] == 0 and row["share_b"] > 0.6 and bool(row["significant"])
    assert "waits_on" in d.to_dict()


def test_migration_table_has_top_producer():
    from profiler.compare import migrate

    specs = [str(ROOT / "reports" / "h200" / v / SHAPE) for v in ("v01_naive", "v03_tensor_cores")]
    m = migrate(specs)
    tops = dict(zip(m.table["version"], m.table["top_producer"]))
    assert list(tops.values()) == ["LDG", "LDSM"]
    assert "← LDG" in m.steps["sentence"].iloc[0] and "← LDSM" in m.steps["sentence"].iloc[0]


def test_show_table_and_html_section(tmp_path):
    """`whowaits show` prints the who-waits-on-whom table; the HTML report's version sections carry it."""
    import os
    import shutil
    import subprocess
    import sys

    exe = shutil.which("whowaits", path=str(Path(sys.executable).parent)) or "whowaits"
    env = dict(os.environ, WHOWAITS_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="200")
    rep = ROOT / "reports" / "h200" / "v03_tensor_cores" / SHAPE
    res = subprocess.run([exe, "show", str(rep)], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "scoreboard stalls ← producer" in res.stdout
    assert "HMMA·short_scoreboard │ ← LDSM (LDSM)" in res.stdout

    from profiler.compare import load_versions, migrate
    from profiler.html import _version_section

    profiled = load_versions([str(rep)])
    m = migrate(profiled=profiled)
    html = _version_section(profiled[0], m)
    assert "Who waits on whom: scoreboard stalls by producer instruction" in html
    assert "← LDSM (LDSM)" in html
