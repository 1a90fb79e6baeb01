"""profiler.sass: the SASS operand parser and control-flow graph, on lines and kernels of the
committed real H200 reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler import sass
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
SHAPE = "b1_h64_s1024_d128_fp16.ncu-rep"
VERSIONS = sorted(p.parent.name for p in (ROOT / "reports" / "h200").glob(f"*/{SHAPE}"))


@pytest.fixture(scope="module")
def launches():
    return {v: load_report(ROOT / "reports" / "h200" / v / SHAPE).launches[0] for v in VERSIONS}


# --- the operand parser, on SASS lines taken from the reports ----------------------------------


@pytest.mark.parametrize(
    "text, reads, writes, sb",
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
        # either reason: data/sass.toml [scoreboard_either]
        ("SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR31+0x58], R3", {"UR31", "R3"}, {"P1"}, "long|short"),
        ("S2R R0, SR_TID.X", set(), {"R0"}, "short"),
        # wgmma: 64 accumulators per thread at N=128; gdesc names the A and B descriptors (UR16..UR19)
        ("HGMMA.64x128x16.F32 R24, gdesc[UR16], RZ, !UPT", {"UR16", "UR17", "UR18", "UR19"},
         {f"R{24 + i}" for i in range(64)}, None),
    ],
)
def test_reads_writes_scoreboard(text, reads, writes, sb):
    ins = sass.parse(text)
    assert set(ins.reads) == reads
    assert set(ins.writes) == writes
    assert ins.scoreboard == sb
    assert ins.rmask == sass.register_mask(reads) and ins.wmask == sass.register_mask(writes)


def test_instruction_fields():
    ins = sass.parse("@!P0  LDSM.16.MT88.4 R8, [R145+UR4+0xb000]")
    assert (ins.opcode, ins.base, ins.modifiers) == ("LDSM.16.MT88.4", "LDSM", ("16", "MT88", "4"))
    assert (ins.guard, ins.guard_negated) == ("P0", True)
    assert [(o.kind, o.regs, o.width) for o in ins.dsts] == [("reg", ("R8", "R9", "R10", "R11"), 4)]
    assert [(o.kind, o.regs) for o in ins.srcs] == [("mem", ("R145", "UR4"))]
    assert ins.in_order == "shared" and ins.scoreboard == "short"

    h = sass.parse("HMMA.16816.F32 R4, R8, R12, R4")
    assert [o.width for o in h.srcs] == [4, 2, 4] and h.dsts[0].width == 4 and h.in_order is None
    assert [o.kind for o in sass.parse("FSEL R108, R108, -INF , !P2").srcs] == ["reg", "imm", "pred"]

    b = sass.parse("@P1   BRA.U.ANY 0x7f22a77a8970")
    assert b.is_branch and b.target == 0x7F22A77A8970 and b.guard == "P1"
    assert sass.parse("BSSY B0, 0x7f22a77a9980").target == 0x7F22A77A9980
    assert sass.parse("EXIT").target is None and not sass.parse("EXIT").is_branch


@pytest.mark.parametrize(
    "text, barriers",
    [
        ("DEPBAR.LE SB0, 0x1", [("sb", 0, 1)]),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x0", [("gsb", 0, 0)]),
        ("BAR.SYNC.DEFER_BLOCKING 0x0", [("cta", 0, None)]),
        ("BAR.ARV 0x2, 0x120", [("cta", 2, 288)]),
        ("BSSY B0, 0x7f22a77a9980", [("convergence", 0, None)]),
        ("BSYNC B0", [("convergence", 0, None)]),
        ("@P2   SYNCS.ARRIVE.TRANS64 RZ, [UR17], R4", [("mbarrier", "[UR17]", None)]),
        ("HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0", [("gsb", 0, None)]),
        ("LDSM.16.M88.4 R8, [R2]", []),
    ],
)
def test_barrier_operands(text, barriers):
    assert [(b.kind, b.id, b.count) for b in sass.parse(text).barriers] == barriers


def test_every_line_of_the_reports_parses(launches):
    """Every SASS line parses to an opcode; the parser's base opcode is the report frame's."""
    for la in launches.values():
        for text, base in zip(la.sass["sass"], la.sass["base"]):
            ins = sass.parse(text)
            assert ins.base == base, text


# --- the control-flow graph --------------------------------------------------------------------


def _cfg(la):
    return sass.build_cfg(la.sass["address"].to_numpy(), la.sass["sass"].tolist(), la.sass["base"].tolist())


def test_v03_loop_structure(launches):
    """v03's main loop, read from the SASS: the block at 0x910 is the loop head (the K/V tile loop:
    LDG prefetch, STS, BAR.SYNC, LDSM, HMMA ...), its latch ``@!P0 BRA`` at 0x38c0 branches back to
    it; the conditional branch at 0x16f0 skips the causal-mask block 0x1700-0x1b10. ncu's trailing
    ``BRA`` to itself after the last EXIT is the other back-edge."""
    la = launches["v03_tensor_cores"]
    off = la.sass["offset"].tolist()
    at = {o: i for i, o in enumerate(off)}
    cfg = _cfg(la)
    assert {(off[j], off[h]) for j, h in cfg.back_edges} == {(0x38C0, 0x910), (0x69F0, 0x69F0)}
    assert {off[h] for h in cfg.loop_heads} == {0x910, 0x69F0}
    head = cfg.blocks[cfg.block_of(at[0x910])]
    latch = cfg.blocks[cfg.block_of(at[0x38C0])]
    mask = cfg.blocks[cfg.block_of(at[0x1700])]
    assert (off[head.start], off[head.end]) == (0x910, 0x16F0)
    assert (off[mask.start], off[mask.end]) == (0x1700, 0x1B10)
    assert head.id in latch.succs and latch.id in head.succs and mask.id in head.succs
    assert (latch.id, head.id) in cfg.block_back_edges
    # the loop entry edge into the head costs one "loop entry"; the back-edge none
    assert sorted((off[p], e) for p, e in cfg.preds[at[0x910]]) == [(0x900, 1), (0x38C0, 0)]


@pytest.mark.parametrize("version", VERSIONS)
def test_blocks_partition_and_edges_agree(version, launches):
    la = launches[version]
    cfg = _cfg(la)
    blocks = cfg.blocks
    assert blocks[0].start == 0 and blocks[-1].end == len(la.sass) - 1
    for a, b in zip(blocks, blocks[1:]):
        assert b.start == a.end + 1
    for b in blocks:
        for i in range(b.start + 1, b.end + 1):  # inside a block: only the fall-through edge
            assert [p for p, _ in cfg.preds[i]] == [i - 1]
        for s in b.succs:
            assert b.id in blocks[s].preds
        assert set(b.succs) == {cfg.block_of(q) for q in cfg.succs[b.end]}
