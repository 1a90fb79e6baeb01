"""Roles and barriers on production kernels nobody here wrote: the zoo under reports/h200/zoo
(cuBLAS nvjet fp16/bf16/fp8/skinny and fp8 row-wise, CUTLASS 3 grouped GEMM, cuDNN SDPA d64,
Triton, FlexAttention, an inductor reduction; profiled on the H200 on 2026-12-02).

Properties on every warp-specialised subject (roles split by thread-index branches), and the ladder's
warp-specialised rungs:

* >= 95% of the samples sit in at least two named roles (not ``common``/``shared``), <= 2% are
  unresolved;
* at least one wait is released by the TMA engine and one by another role;
* each role's warps reach its entry as often as ncu executed it (warps x CTAs);
* every sample ``whowaits show`` calls an mbarrier wait (a long_scoreboard stall whose producer is
  a try-wait) lies on an mbarrier wait site of the role graph.

Then, per subject, the heaviest role-to-role edge and one barrier family, checked by hand against
the SASS (PCs are offsets from the kernel's first instruction).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.analyze.producers import producer_pcs, wait_kind
from profiler.analyze.roles import role_graph
from profiler.report import load_report

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "reports/h200/zoo"
WS = ["cublas-gemm-fp16", "cublas-gemm-bf16", "cublas-gemm-fp8", "cublas-gemm-skinny",
      "scaled-mm-fp8-rowwise", "cutlass-grouped-mm", "cudnn-sdpa-d64"]
ONE_ROLE = ["triton-matmul", "triton-matmul-ws", "flex-attention", "inductor-softmax"]
LADDER_WS = ["v10_warp_specialized", "v11_pingpong", "v13_persistent", "v17_tma_store_o", "v19_lazy_rescale"]
NAMED_OUT = ("common", "shared")

pytestmark = pytest.mark.skipif(not ZOO.is_dir(), reason="the zoo's reports are not in this checkout")


def _report(subject: str) -> Path:
    if subject.startswith("v"):
        return ROOT / "reports/h200" / subject / "b1_h64_s1024_d128_fp16.ncu-rep"
    (path,) = sorted((ZOO / subject).glob("*.ncu-rep"))
    return path


_GRAPHS: dict[str, tuple] = {}


def _graph(subject: str):
    if subject not in _GRAPHS:
        la = load_report(_report(subject)).launches[0]
        _GRAPHS[subject] = (la, role_graph(la))
    return _GRAPHS[subject]


def _edge(g, waiter, barrier):
    hits = [e for e in g.edges if e.waiter == waiter and e.barrier == barrier]
    assert len(hits) == 1, [(e.waiter, e.barrier) for e in g.edges]
    return hits[0]


@pytest.mark.parametrize("subject", WS + LADDER_WS)
def test_samples_sit_in_named_roles(subject):
    _, g = _graph(subject)
    named = [r for r in g.roles if r.name not in NAMED_OUT]
    assert len([r for r in named if r.samples]) >= 2
    assert sum(r.samples for r in named) >= 0.95 * g.total_samples
    assert g.unresolved["samples"] <= 0.02 * g.total_samples, g.unresolved["reasons"]


@pytest.mark.parametrize("subject", WS + LADDER_WS)
def test_tma_and_another_role_release_waits(subject):
    _, g = _graph(subject)
    roles = {r.name for r in g.roles}
    assert any(e.releaser.startswith("TMA ←") and e.samples for e in g.edges)
    others = [e for e in g.edges if e.samples and e.releaser.split(" ")[0] in roles - {e.waiter}]
    assert others, [(e.waiter, e.releaser) for e in g.edges]


@pytest.mark.parametrize("subject", WS + LADDER_WS)
def test_role_warps_match_executed_counts(subject):
    _, g = _graph(subject)
    checked = [r for r in g.roles if r.warps and r.entry is not None]
    assert checked
    for r in checked:
        assert r.entry_executed == r.entry_expected, (r.name, hex(r.entry), r.warps)


@pytest.mark.parametrize("subject", WS + LADDER_WS)
def test_role_graph_accounts_for_what_show_calls_mbarrier_waits(subject):
    la, g = _graph(subject)
    pcs = producer_pcs(la)
    # what show calls an mbarrier wait (a long_scoreboard stall on a SYNCS), on a try-wait's predicate
    # (a SYNCS.EXCH's late operand read, 1-2 samples at the barrier inits, is a scoreboard wait too)
    mb = pcs[[wait_kind(r, p) == "mbarrier wait" and "PHASECHK" in str(t)
              for r, p, t in zip(pcs["reason"], pcs["producer_opcode"], pcs["producer_sass"])]]
    assert len(mb)
    shown = mb.groupby("offset")["samples"].sum()
    sites = [s for s in g.sites if s.kind == "mbarrier"]
    on_site = {pc for s in sites for pc in s.pcs}
    part = {}
    for s in sites:
        for pc, reason, n in s.partial:
            if reason == "long_scoreboard":
                part[pc] = part.get(pc, 0) + n
    for off, n in shown.items():
        assert int(off) in on_site or part.get(int(off), 0) >= round(n), hex(int(off))
    total_mb = sum(e.samples for e in g.edges if e.barrier.startswith("mbarrier"))
    assert total_mb + g.unresolved["samples"] >= shown.sum()


@pytest.mark.parametrize("subject", ONE_ROLE)
def test_kernels_without_specialisation_have_one_role(subject):
    _, g = _graph(subject)
    assert [r.name for r in g.roles] == ["cta"]
    assert g.unresolved["samples"] <= 0.02 * g.total_samples


# --- by hand ---------------------------------------------------------------------------------------


def test_nvjet_fp16_roles_by_hand():
    """nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_NNT, 384 threads: 0x30 `ISETP.LT.AND P0, PT, R2,
    0x100, PT` on SR_TID.X and 0x50 `BRA !P0` send warps 8-11 (tid >= 256) to the producer side,
    where 0x42a0 `USETMAXREG.DEALLOC.CTAPOOL 0x18` runs (528 executions: 4 warps x 132 CTAs) and further
    thread-index branches keep warp 8 on the TMA loads (0x4090 on), warp 10 on the tile scheduler
    (`ATOMG.E.ADD` 0x55e0, its `NANOSLEEP.SYNCS` poll 0x5740), warps 9 and 11 exit; warps 0-7 are
    the two cooperative consumer warpgroups (`USETMAXREG.TRY_ALLOC` 200 in a retry loop; their
    leader warps differ by two instructions). Each role's entry executes once per warp per CTA
    (132 CTAs)."""
    _, g = _graph("cublas-gemm-fp16")
    by = {r.name: r for r in g.roles}
    assert by["consumer"].warps == list(range(8)) and by["consumer"].setmaxnreg == 200
    assert by["consumer"].does == "MMA consumer"
    assert by["producer"].warps == [8, 9, 11] and by["producer"].does == "TMA producer"
    assert by["scheduler"].warps == [10] and by["scheduler"].does == "tile scheduler"
    assert by["producer"].entry == 0x4090 and by["producer"].entry_executed == 132
    assert by["scheduler"].entry_executed == 132 and by["consumer"].entry_executed == 8 * 132


def test_nvjet_fp16_heaviest_role_edge_by_hand():
    """The producer's empty-slot wait: 0x4b30 `SYNCS.PHASECHK.TRANS64.TRYWAIT P3, [R8+UR31], R3` is
    issued for the next stage and its predicate read at the top of the next iteration, 0x49b0
    `BRA !P3` (a lower address, across the back edge: 6,169 long_scoreboard samples). UR31 is a ring
    pointer (0x4340 `UPRMT UR31, UR31, 0x4210, UR4` of `UMOV UR31, 0x2e400`, bumped by 8 at 0x4910);
    the consumers release it from the other CTA of the cluster: 0xac0 `@P1
    SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [R7+UR14], RZ` (UR14 the ring from 0x2e3f8, R7 the peer's
    window bits `IMAD R7, R7, -0x1000000, R9`)."""
    _, g = _graph("cublas-gemm-fp16")
    roles = {r.name for r in g.roles}
    heaviest = next(e for e in g.edges if e.releaser.split(" ")[0] in roles - {e.waiter})
    assert (heaviest.waiter, heaviest.barrier, heaviest.releaser) == (
        "producer", "mbarrier@0x2e3f8+0x8×3", "consumer")
    assert {0x4B30, 0x49B0, 0x48B0, 0x51E0, 0x5360} <= set(heaviest.pcs)
    assert "SYNCS.ARRIVE at mbarrier@0x2e3f8+0x8×3 in consumer" in heaviest.evidence
    assert heaviest.samples >= 6169 and not heaviest.inferred


def test_nvjet_fp16_full_ring_by_hand():
    """The consumers' full-stage ring: 0xad0 `@!P0 SYNCS.PHASECHK.TRANS64.TRYWAIT P2, [UR6], R4`, UR6
    a ring pointer: 0x8b0 `UIADD3 UR6, UR7, 0x10` from 0x600 `UMOV UR7, 0x2e418` (CTA rank by
    `UPRMT … 0x4210` at 0x610), bumped by 0x10 (0x960, 0x39e0) and wrapped by -0x70 (0x970,
    0x39f0): 8 stages of 16 bytes. Its predicate is read at 0x9a0 `BRA !P2` (3,857 long_scoreboard
    samples). The producer's `UTMALDG.3D.MULTICAST [UR8]` (0x4a00: UR9 the same ring from 0x2e418)
    and its expect_tx arrive 0x4b20 `@P1 SYNCS.ARRIVE.TRANS64.RED RZ, [UR9], R6` complete it."""
    _, g = _graph("cublas-gemm-fp16")
    e = _edge(g, "consumer", "mbarrier@0x2e418+0x10×8")
    assert e.releaser == "TMA ← producer" and not e.inferred
    assert {0xAD0, 0x9A0, 0x3B50, 0x3A20} <= set(e.pcs)
    assert "expect_tx arrive" in e.evidence and "UTMALDG signals" in e.evidence
    bar = _edge(g, "consumer", "bar 0")  # BAR.SYNC 0x0, 0x80: one warpgroup's 128 threads
    assert bar.releaser == "consumer (its other warps)" and [0x9E0, "barrier", 6957] in bar.partial


def test_cutlass_grouped_mm_by_hand():
    """CUTLASS 3 grouped GEMM (torch._grouped_mm), 384 threads: warpgroup 0 the producer
    (`USETMAXREG.DEALLOC 0x28`, warp 0's `UTMALDG.2D` at 0x7b80), warpgroups 1-2 the consumers
    (232 registers). Heaviest role edge: the producer's empty-slot waits on mbarrier@0x34640 (8
    stages; out-of-line polls from 0xa360), released by the consumers' cluster arrive 0x44f0 `@P0
    SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [R16+URZ], RZ` whose address is `PRMT R16, R19, 0x654, R16`
    (the rank R19 in the top byte). Full ring: consumer try-wait 0x41f0 `[UR12+0x34280]` (0x34680 +
    stage·8), the producer's expect_tx 0x7b10 `@!P1 SYNCS.ARRIVE.TRANS64 RZ, [R8+URZ+0x34280], R5`
    and its UTMALDGs."""
    _, g = _graph("cutlass-grouped-mm")
    by = {r.name: r for r in g.roles}
    assert by["producer"].warps == [0, 1, 2, 3] and by["producer"].setmaxnreg == 40
    assert by["consumer"].warps == list(range(4, 12)) and by["consumer"].setmaxnreg == 232
    e = _edge(g, "producer", "mbarrier@0x34640×8")
    assert "consumer" in e.releaser and 0xA360 in e.pcs
    full = _edge(g, "consumer", "mbarrier@0x34680×4")
    assert full.releaser == "TMA ← producer" and {0x41F0, 0x4210} <= set(full.pcs)


def test_cudnn_d64_by_hand():
    """cuDNN SDPA at head_dim 64 (IMAD-built barrier addresses): warpgroup 0 the producer (warp 0
    loads, warps 1-3 exit after `USETMAXREG.DEALLOC 0x28`), warpgroups 1-2 the consumers. The
    producer's empty waits on mbarrier@0x458 (polls 0x3c20-0x3c50) are released by the consumers'
    arrives; the consumers' K/V full waits on mbarrier@0x410 by TMA. Nothing left unresolved."""
    _, g = _graph("cudnn-sdpa-d64")
    assert g.unresolved["samples"] == 0
    e = _edge(g, "producer", "mbarrier@0x458[i]")
    assert e.releaser == "consumer" and {0x3C20, 0x3C30} <= set(e.pcs)
    assert _edge(g, "consumer", "mbarrier@0x410[i]").releaser == "TMA ← producer"


@pytest.mark.parametrize("subject, heavy, full", [
    # (waiter, barrier, releaser, PCs of its heaviest readers) for the heaviest role-to-role edge and the
    # consumers' TMA-filled ring, read off the SASS: every PC a `BRA !P` (or the NANOSLEEP poll) reading
    # a try-wait's predicate, with ncu's long_scoreboard samples there.
    ("cublas-gemm-bf16", ("producer", "mbarrier@0x2e3f8+0x8×3", "consumer", {0x49B0, 0x51E0, 0x4B30}),
     ("mbarrier@0x2e418+0x10×8", {0x9A0, 0x3A20, 0x3FB0})),
    ("cublas-gemm-fp8", ("producer", "mbarrier@0x373f8+0x8×6", "consumer", {0x5550, 0x5CC0, 0x5600}),
     ("mbarrier@0x37430+0x10×6", {0xE20, 0xE80, 0x4B50})),
    ("cublas-gemm-skinny", ("producer", "mbarrier@0x343f8+0x8×8", "consumer", {0x3420, 0x3BC0, 0x3320}),
     ("mbarrier@0x34440+0x10×9", {0xA10, 0x2900, 0x2610})),
    ("scaled-mm-fp8-rowwise", ("scheduler", "mbarrier@0x348b8", "producer", {0x6FF0, 0x7000, 0x7010}),
     ("mbarrier@0x34840+0x10×7", set())),
])
def test_other_nvjet_shapes_by_hand(subject, heavy, full):
    """The same nvjet design at other types and shapes: the producer (or, in the row-wise fp8 kernel,
    the tile scheduler polling 0x6ff0 `@!P0 NANOSLEEP.SYNCS` on a barrier the producer arrives on) waits
    longest on another role; the consumers' full ring is filled by TMA."""
    _, g = _graph(subject)
    roles = {r.name for r in g.roles}
    waiter, barrier, releaser, pcs = heavy
    e = next(x for x in g.edges if x.releaser.split(" ")[0] in roles - {x.waiter})
    assert (e.waiter, e.barrier, e.releaser) == (waiter, barrier, releaser)
    assert pcs <= set(e.pcs) and not e.inferred
    f = _edge(g, "consumer", full[0])
    assert f.releaser == "TMA ← producer" and full[1] <= set(f.pcs)


def _ncu_golden(subject: str) -> tuple[dict[int, int], dict[int, int]]:
    """ncu's own source page of a zoo subject (tests/golden/zoo): per-PC all samples and executed
    instructions, keyed by offset from the first PC."""
    import csv
    import gzip

    (path,) = sorted((ROOT / "tests/golden/zoo").glob(f"{subject}_*.source-sass.csv.gz"))
    with gzip.open(path, "rt", newline="") as fh:
        rows = list(csv.reader(fh))
    hi = next(k for k, r in enumerate(rows) if "Address" in r and "Warp Stall Sampling (All Samples)" in r)
    head = rows[hi]
    ia, iss, iex = head.index("Address"), head.index("Warp Stall Sampling (All Samples)"), \
        head.index("Instructions Executed")
    body = [r for r in rows[hi + 1:] if len(r) > iex and r[ia].startswith("0x")]
    first = int(body[0][ia], 16)
    return ({int(r[ia], 16) - first: int(r[iss] or 0) for r in body},
            {int(r[ia], 16) - first: int(r[iex] or 0) for r in body})


@pytest.mark.parametrize("subject", WS)
def test_zoo_edges_and_entries_are_ncus_own_numbers(subject):
    """Edge samples are ncu's own per-PC samples (whole PCs, plus the reasons taken of shared ones, each
    at most the PC's total), and each role's entry count is ncu's executed count, from ncu's source page."""
    ncu, executed = _ncu_golden(subject)
    _, g = _graph(subject)
    assert sum(ncu.values()) == g.total_samples
    for e in g.edges:
        part = 0
        for pc, _, n in e.partial:
            assert 0 < n <= ncu[pc]
            part += n
        assert e.samples == sum(ncu[pc] for pc in e.pcs) + part, (e.waiter, e.barrier)
    for r in g.roles:
        if r.entry is not None:
            assert r.entry_executed == executed[r.entry], r.name
