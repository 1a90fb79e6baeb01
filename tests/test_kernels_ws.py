"""Ladder III without a GPU: the warp-specialised family ``ws`` (v10 on) and the static facts of its rungs
(real nvcc, real cubins).

SASS facts checked by hand on the cubins built here (nvcc 13.0, sm_90a, default configs d128 fp16,
2026-12-01): v10 has 16 HGMMA (8 k16 steps of QK^T + 8 of PV), 2 USETMAXREG (the producer's .dec 24 and
the consumers' .inc 240), 1 BAR (the __syncthreads before the role split); v11 and v12 have 32 HGMMA
(QK^T and PV are each issued at two sites: the first/last unpaired batch and the loop), 2 USETMAXREG and
8 BAR (the scheduler barriers' bar.sync / bar.arrive); v13 (v12 on a persistent grid) the same 32 / 2 / 8;
v14 (the next tile's QK^T[0] in the batch of the current tile's last PV) 48 HGMMA (three QK^T and three PV
issue sites: the CTA's first batch, the loop, the cross-tile batch, the CTA's last batch), 2 USETMAXREG, 10 BAR.
ptxas reports 168 registers for all four: the
entry count that __launch_bounds__(384, 1) fixes and setmaxnreg redistributes (128 x 24 + 256 x 240 =
384 x 168).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernels import build, registry
from kernels.config import WsConfig
from profiler.errors import WhowaitsError

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc"
)


def test_ws_family_threads_short_form_and_parse():
    c = WsConfig(128, 128, 128, 2, 2, True, "bf16")
    assert c.threads == 384 and c.warp_count == 12  # 1 producer + 2 consumer warpgroups
    assert c.template_args() == "__nv_bfloat16, 128, 128, 128, 2, 2, true"
    assert c.short_form() == "d128_m128_n128_c2_s2_bf16_causal"
    name = ("void whowaits::v11_pingpong::flash_fwd<__half, (int)128, (int)128, (int)128, (int)2, (int)2, (bool)0>"
            "(CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, __half *, int, float)")
    assert registry.parse_kernel_name(name) == ("v11_pingpong", WsConfig(128, 128, 128, 2, 2, False, "fp16"))
    with pytest.raises(WhowaitsError):
        WsConfig(consumers=0)


def test_ladder3_rungs_declare_ws_with_setmaxnreg_claims():
    for vid, parent in (("v10", "v09_wgmma"), ("v11", "v10_warp_specialized"), ("v12", "v11_pingpong")):
        v = registry.get(vid)
        assert (v.family, v.abi, v.smem_layout, v.parent) == ("ws", "tensor_maps", "tma_q_kv", parent)
        assert {"SYNCS", "HGMMA", "USETMAXREG"} <= set(v.expect_sass) and not v.allow_spills
        assert v.config.threads == 384 and v.verdict  # measured: the verdict is written


@needs_nvcc
@pytest.mark.parametrize("vid, hgmma, bars", [("v10", 16, 1), ("v11", 32, 8), ("v12", 32, 8), ("v13", 32, 8),
                                                ("v14", 48, 10)])
def test_ladder3_static_sass(vid, hgmma, bars):
    v = registry.get(vid)
    r = build.build(v)
    assert build.static_violations(v, r) == {"spills": [], "expect_sass": [], "forbid_sass": []}
    assert r.registers == 168 and r.spill_bytes == 0
    ops = r.sass_opcodes
    assert ops["HGMMA"] == hgmma and ops["USETMAXREG"] == 2 and ops["BAR"] == bars
    assert "HMMA" not in ops and "LDSM" not in ops


@needs_nvcc
def test_setmaxnreg_split_must_fit_the_launch_bound():
    # 1 consumer warpgroup has no register split (setmaxnreg.cuh): the template refuses it at compile time,
    # which the tuner reports as "does not compile" before any GPU time
    v = registry.get("v10")
    with pytest.raises(WhowaitsError, match="consumer"):
        build.build(v, v.config.replace(block_m=64, consumers=1))


def test_v13_is_persistent_ws():
    v = registry.get("v13")
    assert (v.id, v.family, v.abi, v.smem_layout, v.parent) == (
        "v13_persistent", "ws", "tensor_maps_persistent", "tma_q_kv", "v12_intra_wg_overlap")
    assert {"SYNCS", "HGMMA", "USETMAXREG"} <= set(v.expect_sass) and not v.allow_spills
    assert v.config.threads == 384 and v.verdict


def test_v14_is_persistent_ws_with_two_q_buffers():
    v = registry.get("v14")
    assert (v.id, v.family, v.abi, v.smem_layout, v.parent) == (
        "v14_cross_tile_qk", "ws", "tensor_maps_persistent", "tma_q2_kv", "v13_persistent")
    assert {"SYNCS", "HGMMA", "USETMAXREG"} <= set(v.expect_sass) and not v.allow_spills
    assert v.config.threads == 384 and v.verdict
    # two Q tiles + 2 stages of K and V + the 1 KB alignment slack: 192 KB + 1 KB at d128 (fits the 227 KB)
    assert v.config.smem_bytes("tma_q2_kv") == (2 * 128 + 2 * 2 * 128) * 128 * 2 + 1024 == 197632
    assert v.config.smem_bytes("tma_q2_kv") - v.config.smem_bytes("tma_q_kv") == 128 * 128 * 2


def test_persistent_grid_cap(monkeypatch):
    from kernels import launch

    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "2")
    assert launch.persistent_ctas(None) == 2
    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "0")
    with pytest.raises(WhowaitsError, match="WHOWAITS_MAX_CTAS"):
        launch.persistent_ctas(None)


def test_persistent_grid_whole_clusters(monkeypatch):
    """A kernel compiled with __cluster_dims__ (v26) gets whole clusters: the grid rounded down to a multiple of the
    width, never below one cluster (a cluster may hold a CTA without a tile of its own)."""
    from kernels import launch

    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "132")
    assert launch.persistent_grid(2048, None) == (132, 1, 1)
    assert launch.persistent_grid(2048, None, 2) == (132, 1, 1)
    assert launch.persistent_grid(5, None, 2) == (4, 1, 1)
    assert launch.persistent_grid(1, None, 2) == (2, 1, 1)
    # capped at the clusters that fit at once (v38: clusters of 4 leave a GPC's odd SMs idle)
    assert launch.persistent_grid(2048, None, 4) == (132, 1, 1)
    assert launch.persistent_grid(2048, None, 4, 32) == (128, 1, 1)
    assert launch.persistent_grid(2048, None, 4, 40) == (132, 1, 1)
    assert launch.persistent_grid(6, None, 4, 32) == (4, 1, 1)
    assert launch.resident_clusters(None, 384, 0, 1) is None  # no cluster: no driver call
    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "1")
    assert launch.persistent_grid(100, None) == (1, 1, 1)
    assert launch.persistent_grid(100, None, 2) == (2, 1, 1)
    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "131")
    assert launch.persistent_grid(2048, None, 2) == (130, 1, 1)


def test_persistent_abi_appends_num_bh_to_the_instantiation():
    # ABI tensor_maps_persistent (v13_persistent): the launcher passes B·H after the contract's six
    # arguments, so the generated instantiation must declare it
    import dataclasses

    from kernels.registry import ABIS

    assert "tensor_maps_persistent" in ABIS
    v12 = registry.get("v12")
    plain = build.translation_unit(v12, v12.config)
    persistent = build.translation_unit(dataclasses.replace(v12, abi="tensor_maps_persistent"), v12.config)
    assert plain.rstrip().endswith("__half* __restrict__, int, float);")
    assert persistent.rstrip().endswith("__half* __restrict__, int, float, int);")


def test_o_map_box_rows_match_the_kernels_epilogue():
    # The O map's box (kernels.registry.O_BOX_ROWS) must be the rows one TMA store of the kernel covers: 64 for the
    # warpgroup epilogue (common/sm90/epilogue.cuh, v17-v34, v37), 16 for the warp epilogue (epilogue_warp.cuh,
    # WHOWAITS_EPI_WARP 1: v35, v36). A rung compiled with the warp epilogue under the 64-row ABI would store 64 rows
    # from each warp's 16 (and the other way round a quarter of O): kernels.check catches it on the GPU, this here.
    import re

    from kernels.registry import O_BOX_ROWS, TENSOR_MAPS

    assert set(O_BOX_ROWS) == {abi for abi, n in TENSOR_MAPS.items() if n == 4}
    assert all(rows % 8 == 0 and 64 % rows == 0 for rows in O_BOX_ROWS.values())  # whole swizzle atoms of a 64-row tile
    seen = set()
    for v in registry.versions():
        if v.abi not in O_BOX_ROWS:
            continue
        src = _rung_source_chain(v.source)
        warp_epilogue = re.search(r"^#define WHOWAITS_EPI_WARP 1\b", src, re.M) is not None
        assert O_BOX_ROWS[v.abi] == (16 if warp_epilogue else 64), v.id
        seen.add(v.abi)
    assert seen == set(O_BOX_ROWS)  # both ABIs have a landed rung


def _rung_source_chain(path) -> str:
    """A rung's kernel.cu and every file it includes, transitively (v47 includes v36's, which includes v34's): the
    macros a rung compiles with may be defined anywhere along the chain (kernels.build.included_files)."""
    from kernels.build import included_files

    src = path.read_text()
    return "\n".join([src, *(p.read_text() for p in included_files(src, path) if p.name == "kernel.cu")])


def test_q_map_box_rows_match_the_kernels_q_loads():
    # version.toml's q_box_rows (kernels.launch.map_box_rows) must be the rows one Q load of the kernel covers:
    # 64 with WHOWAITS_Q_SPLIT 1 (v47: one box per consumer, common/sm90/tma.cuh tma_load_rows), else the tile's
    # block_m. A split kernel under block_m-row boxes would load each consumer's part as a whole tile (past the buffer
    # into K's stages), and the other way round leave half of Q unloaded: kernels.check catches it on the GPU, this here.
    import re

    split_rungs = []
    for v in registry.versions():
        split = re.search(r"^#define WHOWAITS_Q_SPLIT 1\b", _rung_source_chain(v.source), re.M) is not None
        assert v.q_box_rows == (64 if split else 0), v.id
        if split:
            split_rungs.append(v.id)
            for hd in v.head_dims:
                c = v.config_for(hd, "fp16", False)
                assert c.block_m == 64 * c.consumers, (v.id, hd)  # one 64-row box per consumer covers the tile
    assert split_rungs == ["v47_q_split"]


def _positions(b: int, g: int, tiles: int, paired: bool) -> list[int]:
    """The tile positions CTA b of g walks: tile_scheduler.cuh (b, b + g, ...) or tile_scheduler_pairs.cuh's paired
    order (2b and 2b + 1 of every chunk of 2g), transcribed."""
    out, k = [], 0
    while True:
        pos = (k >> 1) * 2 * g + 2 * b + (k & 1) if paired else b + k * g
        if pos >= tiles:
            return out
        out.append(pos)
        k += 1


@pytest.mark.parametrize("paired", [False, True])
def test_whole_head_ctas_properties(paired):
    """v42's grid policy over 1,080 problems (m_blocks 1-40 tiles a head, 1-60 heads, 132, 114 or 78 SMs): the grid it
    picks takes no more rounds than one CTA per SM, every tile is walked once, and where it narrows the grid each
    round (per_round x G consecutive positions) holds whole heads, or lies inside one head; no larger grid in range
    would; the shapes named in v42's version.toml get 128."""
    from kernels.launch import whole_head_ctas

    per = 2 if paired else 1
    checked = narrowed = 0
    for m_blocks in range(1, 41):
        for heads in (1, 2, 3, 5, 7, 8, 16, 33, 60):
            tiles = m_blocks * heads
            for sms in (132, 114, 78):
                ctas = min(tiles, sms)
                if paired and tiles < 2 * ctas:
                    continue  # the kernel pairs only with two tiles a CTA (PairedTileScheduler.paired)
                g = whole_head_ctas(tiles, m_blocks, ctas, per)
                assert 1 <= g <= ctas
                walks = [_positions(b, g, tiles, paired) for b in range(g)]
                assert sorted(p for w in walks for p in w) == list(range(tiles))
                base = [_positions(b, ctas, tiles, paired) for b in range(ctas)]
                assert max(map(len, walks)) == max(map(len, base)), (tiles, m_blocks, ctas, g)
                span = per * g
                aligned = span % m_blocks == 0 or m_blocks % span == 0
                if g != ctas:
                    narrowed += 1
                    assert aligned
                    for start in range(0, tiles, span):  # a round: positions [start, start + span)
                        heads_in = {p // m_blocks for p in range(start, min(start + span, tiles))}
                        for h in heads_in:
                            inside = range(h * m_blocks, (h + 1) * m_blocks)
                            assert all(start <= p < start + span for p in inside) or span <= m_blocks
                for bigger in range(g + 1, ctas + 1):
                    rounds_same = max(len(_positions(b, bigger, tiles, paired)) for b in range(bigger)) == max(
                        map(len, base))
                    assert not (rounds_same and ((per * bigger) % m_blocks == 0 or m_blocks % (per * bigger) == 0))
                checked += 1
    assert checked > 300 and narrowed > 50
    assert whole_head_ctas(512, 8, 132) == 128  # the seed shape: 4 rounds of 16 heads
    assert whole_head_ctas(2048, 32, 132) == 128  # b4_h16_s4096_d128: 16 rounds of 4 heads
    assert whole_head_ctas(2048, 128, 132) == 128  # b1_h16_s16384_d128: a head a round
    assert whole_head_ctas(2816, 22, 132) == 132  # b4_h32_s4096_d64 (192-row tiles): 132 holds 6 heads already
    assert whole_head_ctas(2048, 32, 132, 2) == 128  # b4 causal, pairs: 8 heads a round
    with pytest.raises(WhowaitsError, match="must be >= 1"):
        whole_head_ctas(0, 8, 132)


def test_persistent_grid_policy(monkeypatch):
    """The launcher applies a version's grid policy (v42 `grid = "whole_heads"`) after the SM count and the cap."""
    from kernels import launch, registry

    monkeypatch.setenv("WHOWAITS_MAX_CTAS", "132")
    assert registry.get("v42_whole_head_rounds").grid == "whole_heads"
    assert registry.get("v34_q_regs").grid == "sms"
    assert launch.persistent_grid(2048, None, policy="whole_heads", m_blocks=32) == (128, 1, 1)
    assert launch.persistent_grid(2048, None, policy="sms", m_blocks=32) == (132, 1, 1)
    assert launch.persistent_grid(2048, None, policy="whole_heads", m_blocks=32, causal=True) == (128, 1, 1)
    assert launch.persistent_grid(2048, None, 2, policy="whole_heads", m_blocks=32) == (132, 1, 1)  # clusters: as is
    with pytest.raises(WhowaitsError, match="unknown persistent grid policy"):
        launch.persistent_grid(2048, None, policy="tiles")


def test_map_box_rows_per_rung():
    # The boxes the launcher encodes, in argument order (Q, K, V[, O]): Q's from q_box_rows where a rung sets it.
    from kernels.launch import map_box_rows

    v36, v47, v26 = (registry.get(x) for x in ("v36_warp_epilogue_only", "v47_q_split", "v26_kv_multicast"))
    assert map_box_rows(v36, v36.config_for(128, "fp16", False)) == (128, 128, 128, 16)
    assert map_box_rows(v47, v47.config_for(128, "fp16", False)) == (64, 128, 128, 16)
    assert map_box_rows(v47, v47.config_for(64, "bf16", True)) == (64, 128, 128, 16)
    assert map_box_rows(v36, v36.config_for(64, "bf16", True)) == (192, 128, 128, 16)
    assert map_box_rows(v26, v26.config_for(128, "fp16", False), cluster=2)[:3] == (128, 64, 64)
