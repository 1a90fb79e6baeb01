"""The role wait graph (profiler/analyze/roles.py) on real committed reports.

Golden facts come from a hand reading of cuDNN's SASS in the committed full-set starter report
(`whowaits`' per-PC frame, the same lines as ncu's own source page in tests/golden/…source.csv):

* 0x220 `@!P0 BRA` sends the warps of the last warp group to the producer at 0x3b90
  (`WARPSYNC.ALL; USETMAXREG.DEALLOC.CTAPOOL 0x28`: 40 registers); the others fall through to
  0x230 `WARPSYNC.ALL; USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8` (232 registers; the try-alloc loops
  back to 0x230 until it succeeds) and run the HGMMAs: the consumer.
* Barrier identity: every mbarrier address resolves through its registers' single reaching definitions
  to the shared window's base 0x400 plus a ring stage index (e.g. R20 = 0x400 + (R15 << 3)), so the
  barriers are named `mbarrier@0x410[i]` (a ring whose extent the SASS does not show: cuDNN
  initialises its barriers from a per-warp register, so no init address is a constant).
* Consumer K-full wait: 0xaa0 `SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R20+URZ+0x10], R21`,
  0xab0 `@P0 BRA` (ready: skip), 0xac0 the second try-wait, 0xad0 `@!P0 BRA 0x4a90` into the
  out-of-line retry loop 0x4a90..0x4ad0 (`NANOSLEEP.SYNCS` + `PHASECHK`, `BRA` back).
  The producer's `SYNCS.ARRIVE.TRANS64 RZ, [UR31+0x10], R4` (expect_tx 0x8000 bytes) and its
  `UTMALDG.4D [UR16]` with `UR17 = UR31 + 0x10` name the same barrier: released by the TMA engine.
* Producer empty waits: +0x48 (0x44e0..0x4510 + loop 0x4de0..0x4e30) and +0x58 (0x4670..0x46a0 +
  loop 0x4e40..0x4e90), released by the consumer's `SYNCS.ARRIVE.TRANS64.A1T0 … [R20+URZ+0x48]` /
  `+0x58` after each `WARPGROUP.DEPBAR`.
* Pingpong: the consumer's `@!P1 BAR.SYNC 0x4` / `@P1 BAR.SYNC 0x5` (0x14e0/0x14f0) are released by
  `@P1 BAR.ARV 0x4` / `@!P1 BAR.ARV 0x5` of the other consumer warpgroup.
* wgmma waits: `WARPGROUP.DEPBAR.LE gsb0, 0x0` at 0xec0 (after QKᵀ) and 0x2e70 (after PV).
"""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from profiler.analyze.roles import role_graph
from profiler.cli import app
from profiler.report import load_report

from conftest import ROOT

GOLDEN = ROOT / "tests/golden/ext-sdpa-cudnn-fullset_b1_h64_s1024_d128_fp16.source.csv"
CUDNN_FULL = ROOT / "reports/h200/ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep"
CUDNN = str(ROOT / "reports/h200/ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep")
V07 = ROOT / "reports/h200/v07_tuned/b1_h64_s1024_d128_fp16.ncu-rep"


def _ncu_samples(column: str = "Warp Stall Sampling (All Samples)") -> dict[int, int]:
    """ncu's own per-PC 'Warp Stall Sampling (All Samples)' (or another column of its source page,
    e.g. ``stall_barrier``), keyed by offset from the first PC."""
    with open(GOLDEN, newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[1]
    ia, iss = head.index("Address"), head.index(column)
    body = [r for r in rows[2:] if len(r) > iss and r[ia].startswith("0x")]
    first = int(body[0][ia], 16)
    return {int(r[ia], 16) - first: int(r[iss] or 0) for r in body}


#: ncu's source-page column of a stall reason the wait sites take part of a PC for
_NCU_REASON = {"barrier": "stall_barrier", "long_scoreboard": "stall_long_sb"}


def _edge_samples_are_ncus(e, ncu: dict[int, int], by_reason: dict[str, dict[int, int]]) -> None:
    """An edge's samples are ncu's own: all samples of its whole PCs, plus the reasons it takes of
    PCs it shares (a BAR.SYNC's barrier samples on the next PC, a reader's long_scoreboard)."""
    whole = sum(ncu[pc] for pc in e.pcs)
    part = 0
    for pc, reason, n in e.partial:
        assert 0 < n <= ncu[pc], (e.barrier, hex(pc), reason)
        if reason in by_reason:
            assert n <= by_reason[reason][pc], (e.barrier, hex(pc), reason)
        part += n
    assert e.samples == whole + part, (e.waiter, e.barrier)


@pytest.fixture(scope="module")
def cudnn():
    return role_graph(load_report(CUDNN_FULL).launches[0])


def _edge(g, waiter, barrier):
    hits = [e for e in g.edges if e.waiter == waiter and e.barrier == barrier]
    assert len(hits) == 1, [(e.waiter, e.barrier) for e in g.edges]
    return hits[0]


def test_roles_from_setmaxnreg(cudnn):
    by = {r.name: r for r in cudnn.roles}
    assert set(by) == {"common", "consumer", "producer"}
    assert by["consumer"].setmaxnreg == 232 and by["producer"].setmaxnreg == 40
    assert by["consumer"].ranges[0][0] == 0x230  # falls through from the split branch at 0x220
    assert by["producer"].ranges[0][0] == 0x3b90
    assert all(r.source == "inferred" for r in cudnn.roles)
    # every PC has exactly one role
    assert sum(r.pcs for r in cudnn.roles) == 1272


def test_designed_ring_recovered(cudnn):
    k_full = _edge(cudnn, "consumer", "mbarrier@0x410[i]")
    assert k_full.releaser == "TMA ← producer" and not k_full.inferred
    assert k_full.pcs == [0xAA0, 0xAB0, 0xAC0, 0xAD0, 0x4A90, 0x4AA0, 0x4AB0, 0x4AC0, 0x4AD0]
    assert "UTMALDG signals mbarrier@0x410[i]" in k_full.evidence and "expect_tx" in k_full.evidence
    assert _edge(cudnn, "consumer", "mbarrier@0x420[i]").releaser == "TMA ← producer"
    for off in ("0x448", "0x458"):
        assert _edge(cudnn, "producer", f"mbarrier@{off}[i]").releaser == "consumer"
    assert _edge(cudnn, "consumer", "bar 4").releaser == "consumer (other warpgroup)"
    assert _edge(cudnn, "consumer", "bar 5").releaser == "consumer (other warpgroup)"
    wg = _edge(cudnn, "consumer", "wgmma group")
    assert wg.pcs == [0xEC0, 0x2E70] and wg.releaser == "tensor core (wgmma)" and not wg.inferred
    assert cudnn.heaviest() is wg


def test_edge_samples_equal_ncu_own_per_pc_samples(cudnn):
    ncu = _ncu_samples()
    assert sum(ncu.values()) == cudnn.total_samples
    by_reason = {r: _ncu_samples(c) for r, c in _NCU_REASON.items()}
    for e in cudnn.edges:
        _edge_samples_are_ncus(e, ncu, by_reason)
        assert e.share == pytest.approx(e.samples / cudnn.total_samples)
    # the 127 barrier samples on 0x14f0 `@P1 BAR.SYNC 0x5` are those of `@!P1 BAR.SYNC 0x4` at 0x14e0
    # before it (ncu samples a named-barrier wait on the next instruction)
    assert [0x14F0, "barrier", 127] in _edge(cudnn, "consumer", "bar 4").partial
    # the hand-read K-full wait: 0xaa0 + 0xab0 + 0xac0 (the retry loop never sampled)
    k = _edge(cudnn, "consumer", "mbarrier@0x410[i]")
    assert k.samples == ncu[0xAA0] + ncu[0xAB0] + ncu[0xAC0] + ncu[0xAD0] and k.samples > 100


def test_unresolved_is_reported_not_guessed(cudnn):
    assert cudnn.unresolved["samples"] == sum(cudnn.unresolved["reasons"].values())
    paired = sum(e.samples for e in cudnn.edges) + cudnn.unresolved["samples"]
    assert paired == sum(s.samples for s in cudnn.sites)


def test_non_specialised_kernel_has_one_role():
    g = role_graph(load_report(V07).launches[0])
    assert [r.name for r in g.roles] == ["cta"]
    assert {(e.barrier, e.releaser) for e in g.edges} == {("bar 0", "CTA (all warps)"),
                                                          ("SB0", "cp.async (LDGSTS)")}
    assert not any(e.inferred for e in g.edges)


def test_cli_json_and_table():
    runner = CliRunner()
    res = runner.invoke(app, ["roles", CUDNN, "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out) == 1
    obj = out[0]
    assert {"roles", "edges", "unresolved"} <= set(obj)
    assert {"waiter", "barrier", "releaser", "samples", "share", "inferred"} <= set(obj["edges"][0])
    assert {"name", "source", "pcs"} <= set(obj["roles"][0])
    res = runner.invoke(app, ["roles", CUDNN], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "TMA ← producer" in res.stdout and "[mbarrier" not in res.stdout.replace(
        "—[mbarrier", "")


def test_cli_missing_report_is_one_line(tmp_path):
    res = CliRunner().invoke(app, ["roles", str(tmp_path / "nope.ncu-rep")])
    assert res.exit_code != 0


def test_migration_names_the_heaviest_role_edge():
    """Each version's heaviest role edge reaches the migration table (summary ``role_edges``)."""
    from profiler.compare import load_versions, migrate

    m = migrate(profiled=load_versions(["v07_tuned", "ext-sdpa-cudnn"]))
    rows = {r["version"]: r for r in m.table.to_dict(orient="records")}
    assert rows["ext-sdpa-cudnn"]["top_role_edge"] == "consumer —[wgmma group]→ tensor core (wgmma)"
    assert 0.2 < rows["ext-sdpa-cudnn"]["top_role_share"] < 0.3
    assert rows["v07_tuned"]["top_role_edge"] == "cta —[bar 0]→ CTA (all warps)"


def test_pingpong_on_runtime_barrier_ids():
    """v11's consumers take turns with `BAR.SYNC R2, 0x100` / `BAR.ARV R3, 0x100` (ids in registers,
    the other warpgroup's id in R3): paired as an inferred edge to the other warpgroup."""
    g = role_graph(load_report(ROOT / "reports/h200/v11_pingpong/b1_h64_s1024_d128_fp16.ncu-rep").launches[0])
    assert {r.name for r in g.roles} >= {"consumer", "producer"}
    e = _edge(g, "consumer", "bar (runtime id)")
    assert e.releaser == "consumer (other warpgroup)" and e.inferred
    assert _edge(g, "consumer", "wgmma group").releaser == "tensor core (wgmma)"


# --- ladder III: barrier identity through the uniform registers ------------------------------------
#
# v10/v11/v12 keep their barriers in separate `__shared__` arrays (v11/v12: full_k[2], full_v[2],
# empty_k[2], empty_v[2], q_full; v10: full_k[2], full_v[2], empty[2], q_full) addressed through
# uniform registers with no displacement, so matching by displacement collapsed them into
# `mbarrier+0x0`. Hand-read from the committed reports' SASS (`whowaits`' per-PC frame):
#
# v11 prologue (tid 0): `S2UR UR12, SR_CgaCtaId; UMOV UR8, 0x400; UIADD3 UR9, UR8, 0x40;
# ULEA UR9, UR12, UR9, 0x18; SYNCS.EXCH.64 URZ, [UR9], UR4` (mbarrier.init of q_full at 0x440, count 1)
# … `[UR14]`=0x400, `[UR10]`=0x410 (count 1), `[UR11]`=0x420, `[UR8]`=0x430 (count 8), each +0x8:
# nine barriers, full_k 0x400/0x408, full_v 0x410/0x418, empty_k 0x420/0x428, empty_v 0x430/0x438.
# Consumer: 0x4d0 `TRYWAIT [UR12]` (UR12 = ULEA(CgaCtaId, 0x400 + 0x40)) = q_full; 0x550 `[UR11]` =
# full_k[0] (the peeled first batch); loop 0x2e00 `[UR12]` = 0x410 + (UR8 << 3) = full_v[prev],
# 0x2e20 `[R11+UR11]` = 0x400 + stage·8 = full_k[cur]; releases 0xd40 `@!P0 SYNCS.ARRIVE… [UR8]`
# (UR8 = `@!UP1 ULEA …0x420`: empty_k[0]), 0x3a00 `[UR8]` (empty_v ring), 0x3a40 `[R10+URZ]`
# (R10 = `@!P0 LEA R10, R10, UR10, 0x3`, UR10 → 0x420: empty_k ring). Producer: 0x6c10
# `SYNCS.ARRIVE.TRANS64 [UR17]` (expect_tx on q_full 0x440) + UTMALDG 0x6cc0 whose UR17 = 0x440;
# peeled 0x6e40/0x7110 `[UR9]`/`[UR9+0x8]` = full_k 0x400/0x408, 0x6fb0/0x7250 `[UR41]`/`+0x8` =
# full_v; loop 0x74b0 `TRYWAIT [R3+UR10]` = empty_k ring, 0x7680 `[R3+UR11]` = empty_v ring.
# The consumer's arrive addresses are computed under `@!UP1` and used under `@!P0` (lane 0 of the
# warp): that pairing is an assumption, so the producer's edges are `inferred`.
#
# Samples: each edge's PCs summed from ncu's own per-PC "Warp Stall Sampling (All Samples)" column,
# exported on the H200 with `ncu --import REPORT --page source --csv --print-source sass`
# (tests/golden/<version>_…source.csv.gz; see test_ladder3_samples_equal_ncu_own_per_pc_samples).

LADDER3 = {v: ROOT / f"reports/h200/{v}/b1_h64_s1024_d128_fp16.ncu-rep"
           for v in ("v10_warp_specialized", "v11_pingpong", "v12_intra_wg_overlap")}


@pytest.fixture(scope="module")
def ladder3():
    return {v: role_graph(load_report(p).launches[0]) for v, p in LADDER3.items()}


def test_resolver_names_the_barrier_by_its_address():
    from profiler.sass import build_cfg, parse
    from profiler.sass.values import Resolver

    sf = load_report(LADDER3["v11_pingpong"]).launches[0].sass
    texts = [str(t) for t in sf["sass"]]
    ins = [parse(t) for t in texts]
    cfg = build_cfg([int(a) for a in sf["address"]], texts, [p.base for p in ins])
    res = Resolver(ins, cfg, sf["offset"].tolist())
    at = {int(o): i for i, o in enumerate(sf["offset"])}
    v, anchored = res.address(at[0x4D0], "UR12")
    assert anchored and v.exact and v.const == 0x440 and not v.assumed
    v, anchored = res.address(at[0x2E20], "R11+UR11")  # full_k[cur]: base + a runtime stage index
    assert anchored and not v.exact and v.const == 0x400
    v, _ = res.address(at[0xD40], "UR8")  # computed under @!UP1, used under @!P0: an assumption
    assert v.exact and v.const == 0x420 and v.assumed
    assert res.value(at[0x6CC0], "UR17").const == 0x440  # the UTMALDG's barrier register


@pytest.mark.parametrize("version", ["v11_pingpong", "v12_intra_wg_overlap"])
def test_pingpong_rungs_recover_the_designed_ring(ladder3, version):
    g = ladder3[version]
    full = {"mbarrier@0x400×2", "mbarrier@0x410×2", "mbarrier@0x440"}  # full_k, full_v, q_full
    empty = {"mbarrier@0x420×2", "mbarrier@0x430×2"}                    # empty_k, empty_v
    mb = {(e.waiter, e.barrier): e for e in g.edges if e.barrier.startswith("mbarrier")}
    assert set(mb) == {("consumer", b) for b in full} | {("producer", b) for b in empty}
    for b in full:  # consumers ← full barriers (the TMA engine, on behalf of the producer)
        assert mb["consumer", b].releaser == "TMA ← producer" and not mb["consumer", b].inferred
    for b in empty:  # producer ← empty barriers (the consumers' arrives)
        assert mb["producer", b].releaser == "consumer" and mb["producer", b].inferred
        assert "@!UP1" in mb["producer", b].evidence
    # pingpong partners ← named barriers
    assert _edge(g, "consumer", "bar (runtime id)").releaser == "consumer (other warpgroup)"
    assert g.unresolved["samples"] == 0
    assert not any("+0x" in e.barrier for e in g.edges)


def test_v11_wait_sites_by_hand(ladder3):
    g = ladder3["v11_pingpong"]
    q = _edge(g, "consumer", "mbarrier@0x440")
    assert q.pcs == [0x4D0, 0x540, 0x7880, 0x7890, 0x78A0, 0x78B0]  # try-wait, branch, retry loop
    k = _edge(g, "consumer", "mbarrier@0x400×2")
    assert {0x550, 0x5A0, 0x2E20, 0x2EA0} <= set(k.pcs)  # peeled full_k[0] and the loop's full_k[cur]
    v = _edge(g, "consumer", "mbarrier@0x410×2")
    assert {0x2E00, 0x2E10, 0x5AE0, 0x5AF0} <= set(v.pcs)
    assert _edge(g, "producer", "mbarrier@0x420×2").pcs[:2] == [0x74B0, 0x74C0]
    assert _edge(g, "producer", "mbarrier@0x430×2").pcs[:2] == [0x7680, 0x7690]


def test_v10_ring_exact(ladder3):
    g = ladder3["v10_warp_specialized"]
    mb = {(e.waiter, e.barrier): e.releaser for e in g.edges if e.barrier.startswith("mbarrier")}
    assert mb == {("consumer", "mbarrier@0x430"): "TMA ← producer",     # q_full
                  ("consumer", "mbarrier@0x400×2"): "TMA ← producer",   # full_k
                  ("consumer", "mbarrier@0x410×2"): "TMA ← producer",   # full_v
                  ("producer", "mbarrier@0x420×2"): "consumer"}         # empty
    assert not any(e.inferred for e in g.edges)
    assert g.heaviest().barrier == "wgmma group"


@pytest.mark.parametrize("version", list(LADDER3))
def test_ladder3_samples_equal_ncu_own_per_pc_samples(ladder3, version):
    import gzip

    path = ROOT / f"tests/golden/{version}_b1_h64_s1024_d128_fp16.source-sass.csv.gz"
    if not path.exists():
        pytest.skip(f"{path.name} not exported yet")
    with gzip.open(path, "rt", newline="") as fh:
        rows = list(csv.reader(fh))
    hi = next(k for k, r in enumerate(rows) if "Address" in r and "Warp Stall Sampling (All Samples)" in r)
    head = rows[hi]
    ia, iss = head.index("Address"), head.index("Warp Stall Sampling (All Samples)")
    body = [r for r in rows[hi + 1:] if len(r) > iss and r[ia].startswith("0x")]
    first = int(body[0][ia], 16)
    ncu = {int(r[ia], 16) - first: int(r[iss] or 0) for r in body}
    g = ladder3[version]
    assert sum(ncu.values()) == g.total_samples
    for e in g.edges:
        _edge_samples_are_ncus(e, ncu, {})
