"""Who waits on WHOM (profiler.analyze.producers) on the committed real H200 reports."""

from __future__ import annotations

import types
from pathlib import Path

import pandas as pd
import pytest

from profiler import sass
from profiler.analyze.producers import SCOREBOARD_REASONS, parse_operands, producer_pcs, waits_on
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16.ncu-rep"
FENCES = ("MEMBAR", "CCTL", "FENCE", "ERRBAR", "CGAERRBAR")  # base opcodes that wait for all outstanding memory operations
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


def test_parser_sees_every_line_of_the_reports(launches):
    """Every SASS line parses (the parser itself is tested in test_sass.py)."""
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


# --- golden PCs, checked by hand against the SASS --------------------------------------------
#
# Each test pins the SASS text it reasons about (so a report re-collected from other SASS fails here,
# loudly, instead of passing by accident), the structure (which producer a PC waits on, decided from
# the SASS as if every PC were sampled) and shares computed from the report's own per-PC samples (so
# a re-collection from identical SASS keeps passing, whichever PCs it samples). Shared-memory instructions (LDS/LDSM/STS/STSM/ATOMS) complete in issue order for a warp:
# data/sass.toml [in_order].


def _text_at(la) -> dict[int, str]:
    return dict(zip(la.sass["offset"].astype(int), la.sass["sass"].str.strip()))


def _samples_at(la, offset: int, reason: str = "short_scoreboard") -> float:
    return float(la.sass.loc[la.sass["offset"] == offset, f"stall_{reason}"].sum())


def _producers_at(pcs, offset: int, reason: str = "short_scoreboard") -> dict:
    """{producer offset (None when unresolved): (dependency, samples)} of one consumer PC."""
    rows = pcs[(pcs["offset"] == offset) & (pcs["reason"] == reason)]
    return {
        (None if pd.isna(r.producer_offset) else int(r.producer_offset)): (r.dependency, float(r.samples))
        for r in rows.itertuples(index=False)
    }


def _expect_producer(la, pcs, offset: int, producer: int, dep: str = "raw") -> None:
    """The waiter at ``offset`` waits on ``producer`` alone: in the SASS's own structure (as if every
    PC were sampled), and with all of its samples in the report when the report sampled it."""
    assert _producers_at(_every_pc(la), offset) == {producer: (dep, 1.0)}
    n = _samples_at(la, offset)
    assert _producers_at(pcs, offset) == ({producer: (dep, n)} if n else {})


def _expect_text(la, lines: dict[int, str]) -> None:
    at = _text_at(la)
    for off, text in lines.items():
        assert at[off] == text, f"SASS at {off:#x} changed: {at[off]!r}, this test reasons about {text!r}"


def test_v03_fadd_waits_on_the_shuffle_not_on_a_consumed_ldsm(launches, resolved):
    """v03 0x37a0 ``FADD R9, R146, R145`` (the row-sum reduction) waits on SHFL 0x3720 alone.

    Reads: R146 from ``FADD R146`` 0x36f0 (fixed latency: settles it, no producer), R145 from
    ``SHFL.BFLY PT, R145, R146`` 0x3720 (short scoreboard): read after write. It writes R9, whose
    previous writer is ``LDSM.16.MT88.4 R8`` 0x3650 (R8..R11), but ``HMMA R120, R88, R8, R120`` 0x3770
    read R8..R9 and ``HMMA R52, R88, R10, R52`` 0x3780 R10..R11 in between (each waited for the LDSM
    to land), and ``FADD R8`` 0x3790 overwrote R8: the LDSM was complete before 0x37a0 issued. The
    walk used to give half of 0x37a0's samples to it (write after write). Same at 0x3790 ``FADD R8,
    R147, R148``: SHFL 0x36a0 (R148) alone, the LDSM consumed by 0x3770/0x3780.
    """
    la = launches["v03_tensor_cores"]
    pcs, _ = resolved["v03_tensor_cores"]
    _expect_text(la, {
        0x3650: "LDSM.16.MT88.4 R8, [R145+UR4+0xb000]", 0x36A0: "SHFL.BFLY PT, R148, R147, 0x1, 0x1f",
        0x36F0: "FADD R146, R146, R101", 0x3720: "SHFL.BFLY PT, R145, R146, 0x1, 0x1f",
        0x3770: "HMMA.16816.F32 R120, R88, R8, R120", 0x3780: "HMMA.16816.F32 R52, R88, R10, R52",
        0x3790: "FADD R8, R147, R148", 0x37A0: "FADD R9, R146, R145",
    })
    _expect_producer(la, pcs, 0x37A0, 0x3720)
    _expect_producer(la, pcs, 0x3790, 0x36A0)


def test_v03_hmma_0x1070_waits_on_its_own_ldsm(launches, resolved):
    """v03 0x1070 ``HMMA.16816.F32 R8, R40, R84, RZ`` waits on ``LDSM R84`` 0x0fc0 alone.

    B operand R84..R85 comes from ``LDSM.16.M88.4 R84`` 0x0fc0 (read after write). It writes R8..R11,
    last written by ``LDSM.16.M88.4 R8`` 0x0f00, whose result ``HMMA R140, R40, R8, RZ`` 0x0fd0
    (R8..R9) and ``HMMA R108, R40, R10, RZ`` 0x1000 (R10..R11) had already read: complete. (It is also
    earlier than 0x0fc0 in the shared-memory queue.) The walk used to split the samples with 0x0f00.
    """
    la = launches["v03_tensor_cores"]
    pcs, _ = resolved["v03_tensor_cores"]
    _expect_text(la, {
        0x0F00: "LDSM.16.M88.4 R8, [R162+0x6000]", 0x0FC0: "LDSM.16.M88.4 R84, [R162+0x7000]",
        0x0FD0: "HMMA.16816.F32 R140, R40, R8, RZ", 0x1000: "HMMA.16816.F32 R108, R40, R10, RZ",
        0x1070: "HMMA.16816.F32 R8, R40, R84, RZ",
    })
    _expect_producer(la, pcs, 0x1070, 0x0FC0)


@pytest.mark.parametrize("hmma, ldsm, sts, texts", [
    (0x0F40, 0x0ED0, 0x0DD0, ("HMMA.16816.F32 R92, R40, R96, RZ", "LDSM.16.M88.4 R96, [R162+0x4000]",
                              "STS.128 [R153+0x7000], R92")),
    (0x0F70, 0x0EE0, 0x0E70, ("HMMA.16816.F32 R100, R40, R148, RZ", "LDSM.16.M88.4 R148, [R162+0x5000]",
                              "STS.128 [R153+0x8800], R100")),
    (0x0FD0, 0x0F00, 0x0DF0, ("HMMA.16816.F32 R140, R40, R8, RZ", "LDSM.16.M88.4 R8, [R162+0x6000]",
                              "STS.128 [R153+0xb000], R140")),
])
def test_v03_first_hmmas_owe_nothing_to_stores_before_the_barrier(launches, resolved, hmma, ldsm, sts, texts):
    """v03 0x0f40 / 0x0f70 / 0x0fd0, the first HMMAs after ``BAR.SYNC`` 0x0ec0, wait on their LDSM only.

    Each reads its B fragment from the LDSM just after the barrier (read after write) and overwrites
    D = R92 / R100 / R140, which the ``STS.128`` staging K (0x0dd0 / 0x0e70 / 0x0df0) read as data
    (write after read). But those stores were issued before the barrier and before that LDSM, and
    shared-memory instructions complete in order: by the time the LDSM's result lands the store has
    long read its registers. The walk used to give each store half of the HMMA's samples (the
    "HMMA ← STS" row, 1,222 samples).
    """
    la = launches["v03_tensor_cores"]
    pcs, _ = resolved["v03_tensor_cores"]
    _expect_text(la, {hmma: texts[0], ldsm: texts[1], sts: texts[2], 0x0EC0: "BAR.SYNC.DEFER_BLOCKING 0x0"})
    assert sts < 0x0EC0 < ldsm < hmma
    _expect_producer(la, pcs, hmma, ldsm)


_EVERY: dict = {}


def _every_pc(la, reason: str = "short_scoreboard") -> pd.DataFrame:
    """producer_pcs as if every instruction had one sample of ``reason``: what the SASS alone decides,
    whatever PCs a (re-)collection happens to sample."""
    key = (id(la), reason)
    if key in _EVERY:
        return _EVERY[key][1]
    frame = la.sass.copy()
    for col in frame.columns:
        if col.startswith("stall_"):
            frame[col] = 0
    frame[f"stall_{reason}"] = 1
    _EVERY[key] = (la, producer_pcs(types.SimpleNamespace(sass=frame)))  # la kept: its id stays unique
    return _EVERY[key][1]


def test_v03_rows_after_the_fix(launches, resolved):
    """v03's who-waits-on-whom rows once consumed candidates are retired.

    From the SASS alone (every PC, sampled or not): an HMMA's short-scoreboard producer is an LDSM or
    nothing (an HMMA whose fragments an earlier HMMA already read has none: it cannot wait on the
    short scoreboard); no FP32 instruction waits on an LDSM (the old ``FP32 ← LDSM`` row, 837.5
    samples, was write after write on LDSMs consumed in between) and no HMMA on an STS (the old
    ``HMMA ← STS`` row, 1,222 samples, was write after read on stores before the barrier).
    With the report's samples: ``HMMA·short_scoreboard ← LDSM`` takes every short-scoreboard sample of
    those HMMAs, 69.5% of all of v03's samples in the committed report (52,244 of 75,157; the walk
    before the fix said 51,022 = 67.9%), and is the top row.
    """
    la = launches["v03_tensor_cores"]
    _, wo = resolved["v03_tensor_cores"]
    every = _every_pc(la)
    hmma = every[every["opcode_class"] == "HMMA"]
    assert set(hmma["producer_opcode"].dropna()) == {"LDSM"}
    assert not ((every["opcode_class"] == "FP32") & (every["producer_opcode"] == "LDSM")).any()
    assert not ((every["opcode_class"] == "HMMA") & (every["producer_opcode"] == "STS")).any()

    waiting = set(hmma.loc[hmma["producer_opcode"].notna(), "offset"].astype(int))
    _, mat = la.stall_matrix()
    total = float(mat.sum())
    col = la.sass["stall_short_scoreboard"]
    expected = float(col[la.sass["offset"].astype(int).isin(waiting)].sum())

    def row(cls, producer):
        cell = wo[(wo["class"] == cls) & (wo["reason"] == "short_scoreboard") & (wo["producer_opcode"] == producer)]
        return float(cell["samples"].sum()), float(cell["share"].sum())

    samples, share = row("HMMA", "LDSM")
    assert samples == pytest.approx(expected) and share == pytest.approx(expected / total)
    assert share > 0.6
    assert wo.iloc[0][["class", "reason", "producer_opcode"]].tolist() == ["HMMA", "short_scoreboard", "LDSM"]
    assert row("FP32", "LDSM") == (0.0, 0.0) and row("HMMA", "STS") == (0.0, 0.0)


def test_v07_fmnmx_owes_nothing_to_consumed_ldsms(launches, resolved):
    """v07 0x29d0 ``FMNMX R2, R165, R0, !PT`` (row max) waits on ``SHFL.BFLY PT, R0, R165`` 0x2990
    alone.

    It overwrites R2, which ``LDSM.16.M88.4 R212, [R2+0x80]`` 0x1e70 and ``LDSM.16.M88.4 R224,
    [R2+0x1080]`` 0x1e80 read as an address (write after read, read late). But ``HMMA R192, R212, …``
    0x1ff0 and ``HMMA R156, R224, …`` 0x2030 consumed both LDSMs' results; they sit in the same basic
    block after them (0x1630-0x2240), so every path to 0x29d0 passes them: the LDSMs had completed,
    their address read long done. The walk used to give the LDSMs 2/3 of 0x29d0's samples.
    """
    la = launches["v07_tuned"]
    pcs, _ = resolved["v07_tuned"]
    _expect_text(la, {
        0x1E70: "LDSM.16.M88.4 R212, [R2+0x80]", 0x1E80: "LDSM.16.M88.4 R224, [R2+0x1080]",
        0x1FF0: "HMMA.16816.F32 R192, R212, R164, R192", 0x2030: "HMMA.16816.F32 R156, R224, R164, R156",
        0x2990: "SHFL.BFLY PT, R0, R165, 0x1, 0x1f", 0x29D0: "FMNMX R2, R165, R0, !PT",
    })
    at = {o: i for i, o in enumerate(la.sass["offset"].astype(int))}
    cfg = sass.build_cfg(la.sass["address"].to_numpy(), la.sass["sass"].tolist())
    assert len({cfg.block_of(at[o]) for o in (0x1E70, 0x1E80, 0x1FF0, 0x2030)}) == 1
    _expect_producer(la, pcs, 0x29D0, 0x2990)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_producer_completed_in_straight_line(version, launches, resolved):
    """In straight-line code (producer and waiter in one basic block, the producer first), no
    instruction between them read or overwrote a register the producer writes (that instruction
    would have waited for it), nor, for a write after read, overwrote a late-read register the
    producer reads; and no later shared-memory instruction in between was itself a candidate of a
    read-after-write or write-after-write wait."""
    la = launches[version]
    pcs, _ = resolved[version]
    at = {int(a): i for i, a in enumerate(la.sass["address"])}
    texts = la.sass["sass"].tolist()
    cfg = sass.build_cfg(la.sass["address"].to_numpy(), texts, la.sass["base"].tolist())
    late = sass.late_read_mask()
    res = pcs[pcs["producer_address"].notna() & (pcs["dependency"] != "depbar")]
    cands = res.groupby(["address", "reason"])["producer_address"].apply(lambda s: {at[int(a)] for a in s}).to_dict()
    checked = 0
    for r in res.itertuples(index=False):
        c, k = at[int(r.address)], at[int(r.producer_address)]
        if not (k < c and cfg.block_of(k) == cfg.block_of(c)):
            continue
        checked += 1
        p = sass.parse(texts[k])
        for j in range(k + 1, c):
            q = sass.parse(texts[j])
            assert not (q.rmask | q.wmask) & p.wmask, (version, r.sass, r.producer_sass, texts[j])
            if r.dependency == "war":
                assert not q.wmask & p.rmask & late, (version, r.sass, r.producer_sass, texts[j])
            if p.in_order and q.in_order == p.in_order and r.dependency in ("raw", "waw"):
                assert j not in cands[(r.address, r.reason)], (version, r.sass, r.producer_sass, texts[j])
    assert checked


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
        # unresolved is reported, and small. A memory fence (MEMBAR, the L1 invalidate CCTL of an ld.acquire, FENCE)
        # waits for every memory operation in flight, not for one instruction's register: no walk names a producer,
        # and its samples are exactly the waits_on rows of the pseudo-producer MEMORY / "memory in flight"
        # (data/producers.toml [fences]; v40 at the seed: its stream-K flags' release and acquire), never unresolved
        if total:
            na = pcs[pcs["producer_address"].isna() & (pcs["reason"] == reason)]
            is_fence = na["sass"].map(lambda t: sass.parse(t).base in FENCES).astype(bool)
            fence = float(na.loc[is_fence, "samples"].sum())
            mem = wo[(wo["reason"] == reason) & (wo["producer_class"] == "MEMORY")]
            assert float(mem["samples"].sum()) == pytest.approx(fence, abs=1e-6), (version, reason)
            assert (mem["producer_opcode"] == "memory in flight").all()
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
        assert SCOREBOARD_REASONS[r.reason] in prod.scoreboard.split("|")  # "long|short": data/sass.toml [scoreboard_either]
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
