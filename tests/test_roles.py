"""The role wait graph (profiler/analyze/roles.py) on real committed reports.

Golden facts come from a hand reading of cuDNN's SASS in the committed full-set starter report
(`whowaits`' per-PC frame, the same lines as ncu's own source page in tests/golden/…source.csv):

* 0x220 `@!P0 BRA` sends the warps of the last warp group to the producer at 0x3b90
  (`WARPSYNC.ALL; USETMAXREG.DEALLOC.CTAPOOL 0x28`: 40 registers); the others fall through to
  0x230 `WARPSYNC.ALL; USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8` (232 registers; the try-alloc loops
  back to 0x230 until it succeeds) and run the HGMMAs: the consumer.
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


def _ncu_samples() -> dict[int, int]:
    """ncu's own per-PC 'Warp Stall Sampling (All Samples)', keyed by offset from the first PC."""
    with open(GOLDEN, newline="") as fh:
        rows = list(csv.reader(fh))
    head = rows[1]
    ia, iss = head.index("Address"), head.index("Warp Stall Sampling (All Samples)")
    body = [r for r in rows[2:] if len(r) > iss and r[ia].startswith("0x")]
    first = int(body[0][ia], 16)
    return {int(r[ia], 16) - first: int(r[iss] or 0) for r in body}


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
    k_full = _edge(cudnn, "consumer", "mbarrier+0x10")
    assert k_full.releaser == "TMA ← producer" and k_full.inferred
    assert k_full.pcs == [0xAA0, 0xAB0, 0xAC0, 0xAD0, 0x4A90, 0x4AA0, 0x4AB0, 0x4AC0, 0x4AD0]
    assert "UTMALDG signals +0x10" in k_full.evidence and "expect_tx" in k_full.evidence
    assert _edge(cudnn, "consumer", "mbarrier+0x20").releaser == "TMA ← producer"
    for off in ("0x48", "0x58"):
        assert _edge(cudnn, "producer", f"mbarrier+{off}").releaser == "consumer"
    assert _edge(cudnn, "consumer", "bar 4").releaser == "consumer (other warpgroup)"
    assert _edge(cudnn, "consumer", "bar 5").releaser == "consumer (other warpgroup)"
    wg = _edge(cudnn, "consumer", "wgmma group")
    assert wg.pcs == [0xEC0, 0x2E70] and wg.releaser == "tensor core (wgmma)" and not wg.inferred
    assert cudnn.heaviest() is wg


def test_edge_samples_equal_ncu_own_per_pc_samples(cudnn):
    ncu = _ncu_samples()
    assert sum(ncu.values()) == cudnn.total_samples
    for e in cudnn.edges:
        assert e.samples == sum(ncu[pc] for pc in e.pcs), (e.waiter, e.barrier)
        assert e.share == pytest.approx(e.samples / cudnn.total_samples)
    # the hand-read K-full wait: 0xaa0 + 0xab0 + 0xac0 (the retry loop never sampled)
    k = _edge(cudnn, "consumer", "mbarrier+0x10")
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
