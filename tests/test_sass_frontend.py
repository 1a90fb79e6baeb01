"""The SASS front end on every committed report (our ladder, cuDNN, FlashAttention 2, the public
reports from other GPUs, and the zoo of production kernels under reports/h200/zoo when present):
properties of the control-flow graph that ncu's own executed counts must agree with.

* Every instruction ncu saw executed (``inst_executed > 0``) is reachable from instruction 0.
* Executed counts are conserved along the CFG's edges (profiler/sass/flow.py says the rules: equal
  counts inside a block, inflow and outflow bounds, exact hand-over where no divergence can happen;
  warp-level counts make only these exact, so the tolerance is zero on each).

A CFG that drops a conditional branch's fall-through (a ``BRA !P0, T`` read as unconditional, as
before cuBLAS' branch form was understood) fails both; the negative tests below show it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profiler.report import load_report
from profiler.sass import build_cfg, parse
from profiler.sass.flow import flow_violations, unreachable_executed

ROOT = Path(__file__).resolve().parents[1]
_GLOBS = [(ROOT, "reports/h200/**/*.ncu-rep"), (ROOT, "tests/public-reports/**/*.ncu-rep"),
          (Path("/work/shared/starter-reports"), "*.ncu-rep")]


def _subjects() -> list[Path]:
    out: list[Path] = []
    for base, pattern in _GLOBS:
        if base.is_dir():
            out += sorted(base.glob(pattern))
    return out


SUBJECTS = _subjects()


def _launches(path: Path):
    for la in load_report(path).launches:
        sf = la.sass
        if len(sf) and "inst_executed" in sf.columns and not sf["inst_executed"].isna().all():
            yield la


def _cfg_of(la, texts=None):
    sf = la.sass
    texts = [str(t) for t in sf["sass"]] if texts is None else texts
    ins = [parse(t) for t in texts]
    return build_cfg([int(a) for a in sf["address"]], texts, [p.base for p in ins]), ins


def _name(p: Path) -> str:
    return "/".join(p.parts[-3:])


@pytest.mark.slow
@pytest.mark.parametrize("path", SUBJECTS, ids=_name)
def test_executed_code_is_reachable_and_counts_are_conserved(path):
    n = 0
    for la in _launches(path):
        n += 1
        ex = la.sass["inst_executed"].fillna(0).astype(int).tolist()
        cfg, ins = _cfg_of(la)
        offs = la.sass["offset"].tolist()
        assert unreachable_executed(cfg, ex) == [], f"launch {la.index}: executed but unreachable"
        bad = flow_violations(cfg, ex, ins)
        assert bad == [], [(v.kind, hex(offs[v.start]), v.count, v.bound) for v in bad[:5]]
    if n == 0:
        pytest.skip("no per-PC executed counts in this report")


def test_enough_subjects():
    # the ladder (19 rungs), cuDNN and FA2 (4 + 2 starters), and the public reports
    assert len(SUBJECTS) >= 30


# --- branch forms ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, guard, cond, conditional", [
    ("BRA 0x100", None, None, False),
    ("@!P0  BRA 0x100", ("P0", True), None, True),
    ("BRA !P0, 0x100", None, ("P0", True), True),            # cuBLAS nvjet
    ("BRA P5, 0x100", None, ("P5", False), True),
    ("BRA.U UP1, 0x100", None, ("UP1", False), True),        # uniform predicate
    ("BRA.U !UP0, 0x100", None, ("UP0", True), True),
    ("@!P0  BRA P1, 0x7fa7bf7a42a0", ("P0", True), ("P1", False), True),  # v08 0x2d0: both
    ("BRA PT, 0x100", None, None, False),
    ("@P2  BRA.U.ANY 0x100", ("P2", False), None, True),
])
def test_branch_condition_forms(text, guard, cond, conditional):
    p = parse(text)
    assert p.target == 0x100 or p.target == 0x7fa7bf7a42a0
    assert ((p.guard, p.guard_negated) if p.guard else None) == guard
    assert ((p.cond, p.cond_negated) if p.cond else None) == cond
    assert p.conditional is conditional
    assert not p.writes  # a branch writes nothing; its predicate is read
    if cond:
        assert cond[0] in p.reads


def test_never_taken_branch_has_no_edge():
    cfg = build_cfg([0, 16, 32], ["BRA !PT, 0x20", "NOP", "EXIT"])
    assert cfg.succs[0] == [1]
    cfg = build_cfg([0, 16, 32], ["BRA PT, 0x20", "NOP", "EXIT"])
    assert cfg.succs[0] == [2]


def test_guarded_exit_falls_through_and_only_instruction_0_enters():
    cfg = build_cfg([0, 16, 32, 48], ["@P0 EXIT", "EXIT", "NOP", "EXIT"])
    assert cfg.succs[0] == [1] and cfg.succs[1] == [] and cfg.preds[2] == []
    ex = [4, 2, 0, 0]
    assert unreachable_executed(cfg, ex) == []
    assert unreachable_executed(cfg, [4, 2, 1, 1]) == [2, 3]


_GUARDED = re.compile(r"^@(!?)(U?P[0-6])\s+BRA\s+(0x[0-9a-f]+)$")


def _operand_form(t: str) -> str:
    """``@!P0 BRA T`` written as cuBLAS does: ``BRA !P0, T`` (``BRA.U`` for a uniform predicate)."""
    m = _GUARDED.match(t.strip())
    if not m:
        return t
    op = "BRA.U" if m.group(2).startswith("U") else "BRA"
    return f"{op} {m.group(1)}{m.group(2)}, {m.group(3)}"


FORM_SUBJECTS = [ROOT / "reports/h200/ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep",
                 ROOT / "reports/h200/v11_pingpong/b1_h64_s1024_d128_fp16.ncu-rep",
                 ROOT / "reports/h200/v07_tuned/b1_h64_s1024_d128_fp16.ncu-rep"]


@pytest.mark.parametrize("path", FORM_SUBJECTS, ids=_name)
def test_operand_form_branches_give_the_same_cfg(path):
    la = next(_launches(path))
    texts = [str(t) for t in la.sass["sass"]]
    moved = [_operand_form(t) for t in texts]
    assert sum(a != b for a, b in zip(texts, moved)) > 20
    a, _ = _cfg_of(la, texts)
    b, ins = _cfg_of(la, moved)
    assert a.preds == b.preds and a.back_edges == b.back_edges
    ex = la.sass["inst_executed"].fillna(0).astype(int).tolist()
    assert flow_violations(b, ex, ins) == []


@pytest.mark.parametrize("path", FORM_SUBJECTS[:1], ids=_name)
def test_a_dropped_fall_through_is_caught(path):
    """Negative control: read every conditional branch as unconditional (what the old front end did
    with ``BRA !P0, T``): executed code loses its inflow and becomes unreachable."""
    la = next(_launches(path))
    texts = [re.sub(r"^@!?U?P[0-6]\s+(BRA)", r"\1", str(t).strip()) for t in la.sass["sass"]]
    cfg, ins = _cfg_of(la, texts)
    ex = la.sass["inst_executed"].fillna(0).astype(int).tolist()
    assert len(unreachable_executed(cfg, ex)) > 100
    assert any(v.kind == "inflow" for v in flow_violations(cfg, ex, ins))


def test_collective_sends_the_other_lanes_to_its_target():
    """CUTLASS 3 (zoo grouped mm) 0xb1c0 ``WARPSYNC.COLLECTIVE R3, T`` with T = 0xb200 ``BSYNC B1``:
    ncu counts 1,984 executions of the BSYNC and 992 of the ``ELECT`` … ``ENDCOLLECTIVE`` before it,
    so the lanes outside the collective reach the BSYNC by the collective's own edge."""
    p = parse("WARPSYNC.COLLECTIVE R3, 0x7f4fbd7b2500")
    assert p.target == 0x7f4fbd7b2500 and not p.writes and "R3" in p.reads
    assert parse("WARPSYNC.ALL").target is None
    cfg = build_cfg([0, 16, 32, 48, 64], ["WARPSYNC.COLLECTIVE R3, 0x30", "ELECT P0, UR62, PT",
                                          "ENDCOLLECTIVE", "BSYNC B1", "EXIT"])
    assert cfg.succs[0] == [1, 3]


NVJET = ROOT / "reports/h200/zoo/cublas-gemm-fp16/m8192_n8192_k8192_fp16.ncu-rep"


@pytest.mark.skipif(not NVJET.exists(), reason="the zoo's cuBLAS report is not in this checkout")
def test_nvjet_branch_forms():
    """cuBLAS nvjet_sm90 (torch.matmul 8192² fp16, zoo): 1,408 instructions, 72 branches, 40 with a
    predicate operand (``BRA !P0, T``, ``BRA.U !UP2, T``, ``@!P2 BRA.U !UP2, T``). Read as
    unconditional (the old front end), only 80 instructions are reachable; read as conditional,
    1,404 are (4 are padding after the final ``BRA`` to itself) and every one of the 1,040
    executed ones is."""
    la = next(_launches(NVJET))
    texts = [str(t) for t in la.sass["sass"]]
    ins = [parse(t) for t in texts]
    assert (len(ins), sum(p.base == "BRA" for p in ins)) == (1408, 72)
    assert sum(p.base == "BRA" and p.cond is not None for p in ins) == 40
    from profiler.sass.flow import reachable

    addrs = [int(a) for a in la.sass["address"]]
    old = [re.sub(r"^(\s*(?:@!?U?P\w+\s+)?BRA(?:\.\w+)*)\s+!?U?P[0-6T],", r"\1", t) for t in texts]
    assert len(reachable(build_cfg(addrs, old))) == 80
    assert len(reachable(build_cfg(addrs, texts))) == 1404
    ex = la.sass["inst_executed"].fillna(0).astype(int).tolist()
    assert sum(e > 0 for e in ex) == 1040


# --- values: CTA-rank window bits, ring pointers -----------------------------------------------------


def _resolver(texts):
    from profiler.sass.values import Resolver

    addrs = list(range(0, 16 * len(texts), 16))
    ins = [parse(t) for t in texts]
    return Resolver(ins, build_cfg(addrs, texts), addrs)


@pytest.mark.parametrize("window", [
    ["UPRMT UR6, UR4, 0x4210, UR5"],                 # nvjet: the rank's low byte on top
    ["PRMT R7, R5, 0x654, R4", "R2UR UR6, R7"],     # CUTLASS' cluster arrive: rank R5, address R4
    ["IMAD R7, R5, 0x1000000, R4", "R2UR UR6, R7"],
    ["IMAD R7, R5, -0x1000000, R4", "R2UR UR6, R7"],
    ["USHF.L.U32 UR7, UR5, 0x18, URZ", "UIADD3 UR6, UR7, UR4, URZ"],
    ["ULEA UR6, UR5, UR4, 0x18"],
])
def test_cta_rank_is_window_bits(window):
    """Whichever way the compiler puts a CTA's rank (own or a peer's, here an unknown register UR5/R5
    after a XOR) above bit 24, the barrier is the low bits: 0x2e418 + 0x8."""
    texts = ["S2UR UR5, SR_CgaCtaId", "ULOP3.LUT UR5, UR5, 0x1, URZ, 0x3c, !UPT", "MOV R5, UR5",
             "UMOV UR4, 0x2e418", "MOV R4, UR4", *window, "SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR6+0x8], RZ", "EXIT"]
    r = _resolver(texts)
    v, anchored = r.address(len(texts) - 2, "UR6+0x8")
    assert anchored and v.exact and v.const == 0x2E420, v


def test_ring_pointer_stride_and_stages():
    """nvjet's consumer ring: a base, bumped by 0x10 in the loop, wrapped by -0x70 (8 stages), moved
    through a copy before the try-wait."""
    texts = [
        "UMOV UR7, 0x2e418",                               # 0x00
        "UIADD3 UR6, UR7, 0x10, URZ",                      # 0x10 the first stage after the base
        "UMOV UR7, UR6",                                   # 0x20 loop head
        "SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR7], R4",    # 0x30
        "UISETP.NE.AND UP3, UPT, UR8, 0x7, UPT",           # 0x40
        "@!UP3 UIADD3 UR6, UR7, 0x10, URZ",                # 0x50
        "@UP3 UIADD3 UR6, UR7, -0x70, URZ",                # 0x60
        "BRA 0x20",                                        # 0x70
    ]
    r = _resolver(texts)
    v, anchored = r.address(3, "UR7")
    assert anchored and not v.exact and v.ring == (0x10, 8, 0x2E428) and v.const == 0x2E428


def test_thread_index_branches_per_warp():
    """A 384-thread CTA split as cuBLAS does: tid < 256 (warps 0-7) to the consumer code, warp 8 of the
    rest to a TMA copy, the others exit."""
    from profiler.sass.values import Resolver
    from profiler.sass.warps import warp_reach

    texts = [
        "S2R R0, SR_TID.X",                          # 0x00
        "ISETP.LT.AND P0, PT, R0, 0x100, PT",        # 0x10
        "BRA !P0, 0x50",                             # 0x20 warps 8-11 jump
        "HGMMA.64x64x16.F32 R24, gdesc[UR16], RZ",   # 0x30 consumers
        "EXIT",                                      # 0x40
        "SHF.R.U32.HI R1, RZ, 0x5, R0",              # 0x50 warp index
        "ISETP.NE.AND P1, PT, R1, 0x8, PT",          # 0x60
        "@P1 EXIT",                                  # 0x70 warps 9-11 leave
        "UTMALDG.2D [UR8], [UR4]",                   # 0x80 warp 8
        "EXIT",                                      # 0x90
    ]
    addrs = list(range(0, 16 * len(texts), 16))
    ins = [parse(t) for t in texts]
    cfg = build_cfg(addrs, texts)
    wr = warp_reach(ins, cfg, Resolver(ins, cfg, addrs), (384, 1, 1), {a: i for i, a in enumerate(addrs)})
    assert wr.warps == 12
    assert all(3 in wr.reach[w] and 5 not in wr.reach[w] for w in range(8))
    assert 8 in wr.reach[8] and 3 not in wr.reach[8]
    assert all(8 not in wr.reach[w] and 7 in wr.reach[w] for w in (9, 10, 11))
    assert wr.decided[2] == ("not",) * 8 + ("taken",) * 4
