"""Ladder II without a GPU: config families, launch ABIs, config-only rungs, ptxas warnings as errors,
and the static SASS facts of the Hopper rungs (real nvcc, real cubins).

SASS facts checked by hand on the cubins built here (nvcc 13.0, sm_90a, default configs, 2026-12-01):
v08 d128 fp16 has 10 UTMALDG (Q: 2 boxes, K and V: 2 boxes each, in the prologue and the refill path),
256 HMMA, 80 LDSM, no LDGSTS; v09 d128 fp16 has 16 HGMMA (8 k16 steps of QK^T + 8 of PV), no HMMA/LDSM.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernels import build, registry, sass
from kernels.config import FAMILIES, FwdConfig, WgConfig, WsConfig
from profiler.errors import WhowaitsError

needs_nvcc = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="no nvcc"
)


def test_families_template_args_and_short_forms():
    assert FAMILIES == {"fwd": FwdConfig, "wg": WgConfig, "ws": WsConfig}  # ws: ladder III (test_kernels_ws.py)
    w = WgConfig(128, 128, 128, 2, 2, False, "bf16")
    assert w.template_args() == "__nv_bfloat16, 128, 128, 128, 2, 2, false"
    assert w.short_form() == "d128_m128_n128_g2_s2_bf16"
    assert w.threads == 256 and w.warp_count == 8
    f = FwdConfig(128, 128, 64, 4, 2, True, "fp16")
    assert f.short_form() == "d128_m128_n64_w4_s2_fp16_causal" and f.threads == 128
    # tma_q_kv: the tiles plus 1 KB to align the base to the 1024-byte swizzle atom
    assert w.smem_bytes("tma_q_kv") == (128 + 2 * 2 * 128) * 128 * 2 + 1024
    with pytest.raises(WhowaitsError):
        WgConfig(warpgroups=0)


def test_same_name_parses_in_each_family():
    name = "void whowaits::v09_wgmma::flash_fwd<__half, 128, 128, 128, 2, 2, false>(CUtensorMap, CUtensorMap, CUtensorMap, __half *, int, float)"
    assert WgConfig.from_kernel_name(name) == ("v09_wgmma", WgConfig(128, 128, 128, 2, 2, False, "fp16"))
    # the registry picks the family from the version id: v09 is `wg`, v07 is `fwd`
    assert registry.parse_kernel_name(name) == ("v09_wgmma", WgConfig(128, 128, 128, 2, 2, False, "fp16"))
    v07 = "whowaits::v07_tuned::flash_fwd<__half, (int)128, (int)128, (int)64, (int)4, (int)2, (bool)0>"
    assert registry.parse_kernel_name(v07) == ("v07_tuned", FwdConfig(128, 128, 64, 4, 2, False, "fp16"))
    shown = "void flash_fwd<__half, 128, 32, 16, 8, 1, 0>(const T1 *, const T1 *, const T1 *, T1 *, int, float)"
    assert registry.parse_kernel_name(shown) == (None, FwdConfig(128, 32, 16, 8, 1, False, "fp16"))


def test_registry_declares_family_abi_source():
    v07, v08, v09 = registry.get("v07"), registry.get("v08"), registry.get("v09")
    assert (v07.family, v07.abi, v07.source_version) == ("fwd", "pointers", "v06_softmax_fusion")
    assert v07.source == registry.get("v06").source  # config-only rung: v06's kernel.cu, v07's namespace
    assert (v08.family, v08.abi, v08.smem_layout) == ("fwd", "tensor_maps", "tma_q_kv")
    assert (v09.family, v09.abi, v09.smem_layout) == ("wg", "tensor_maps", "tma_q_kv")
    assert isinstance(v09.config, WgConfig) and v09.tunable_fields == ("block_m", "block_n", "warpgroups", "stages")
    for v in registry.versions():
        if v.number <= 6:
            assert (v.family, v.abi, v.source_version) == ("fwd", "pointers", "")


def _write(root: Path, vid: str, body: str, kernel: bool = True) -> None:
    (root / vid).mkdir(parents=True)
    if kernel:
        (root / vid / "kernel.cu").write_text("// empty\n")
    (root / vid / "version.toml").write_text(f'id = "{vid}"\n' + body)


BODY = """parent = ""
title = "t"
change = "c"
hypothesis = "h"
expected_bottleneck = "b"
arch = "sm_90a"
smem_layout = "tma_q_kv"
{extra}
[config]
head_dim = 128
block_m = 128
block_n = 128
{unit}
stages = 2
"""


def test_registry_rejects_bad_family_abi_source(tmp_path):
    ok = tmp_path / "ok"
    _write(ok, "v01_a", BODY.format(extra='family = "wg"\nabi = "tensor_maps"', unit="warpgroups = 2"))
    _write(ok, "v02_b", BODY.format(extra='family = "wg"\nabi = "tensor_maps"\nsource = "v01_a"', unit="warpgroups = 2"),
           kernel=False)
    a, b = registry.versions(ok)
    assert b.source == a.source and b.config == WgConfig(128, 128, 128, 2, 2)
    cases = [
        ('family = "xx"', "warps = 4", "family 'xx'"),
        ('abi = "magic"', "warps = 4", "abi 'magic'"),
        ('family = "wg"', "warps = 4", "unknown \\[config\\] field 'warps'"),
        ('source = "v07_missing"', "warps = 4", "source 'v07_missing' has no kernel.cu"),
    ]
    for i, (extra, unit, msg) in enumerate(cases):
        root = tmp_path / f"bad{i}"
        _write(root, "v03_c", BODY.format(extra=extra, unit=unit), kernel="source" not in extra)
        with pytest.raises(WhowaitsError, match=msg):
            registry.versions(root)
    both = tmp_path / "both"
    _write(both, "v01_a", BODY.format(extra="", unit="warps = 4"))
    _write(both, "v02_b", BODY.format(extra='source = "v01_a"', unit="warps = 4"))
    with pytest.raises(WhowaitsError, match="must not have its own kernel.cu"):
        registry.versions(both)


def test_translation_unit_per_abi():
    v07, v09 = registry.get("v07"), registry.get("v09")
    tu7 = build.translation_unit(v07, v07.config)
    assert '#define WHOWAITS_NAMESPACE v07_tuned\n#include "v06_softmax_fusion/kernel.cu"' in tu7
    assert "const __half* __restrict__, const __half* __restrict__" in tu7
    tu9 = build.translation_unit(v09, v09.config)
    assert "flash_fwd<__half, 128, 128, 128, 2, 2, false>" in tu9
    assert tu9.count("const __grid_constant__ CUtensorMap") == 3


def test_fatal_ptxas_warnings():
    log = (
        "ptxas info    : Compiling entry function '_Z1fv' for 'sm_90a'\n"
        "ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "the presence of Extern calls in the function '_Z1fv'.\n"
        "ptxas warning : Registers are spilled\n"
    )
    assert build.fatal_warnings(log) == [log.splitlines()[1].strip()]
    assert build.fatal_warnings("ptxas warning : (C7508) setmaxnreg ignored") != []
    assert build.fatal_warnings("ptxas info : Used 12 registers") == []
    # nvcc 13.0's own line for a traced v11 build (kernels.tracebuild.build_traced, 2026-12-01): an "info" line
    c7519 = ("ptxas info    : (C7519) warpgroup.arrive is injected in around line 3012 by compiler to allow use "
             "of registers in GMMA in function '_ZN8whowaits12v11_pingpong9flash_fwdI6__halfLi128ELi128ELi128ELi2ELi2ELb0EEEv14CUtensorMap_stS3_S3_PT_if'")
    assert build.fatal_warnings(c7519) == [c7519]
    assert build.fatal_warnings(c7519, allow=("C7519",)) == []
    assert build.fatal_warnings("ptxas info    : (C7519) ...", allow=("C7515",)) != []
    # nvcc 13.0's line for v23 at d64 (an "info" line too)
    c7511 = ("ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
             "to insufficient register resources for the wgmma pipeline in the function '_ZN8whowaits13v23_exp2_poly'")
    assert build.fatal_warnings(c7511) == [c7511] and build.fatal_warnings(c7511, allow=("C7511",)) == []


@needs_nvcc
def test_c7511_fails_a_build_unless_the_rung_allows_it(tmp_path, monkeypatch):
    """C7511 (wgmma serialised 'due to insufficient register resources', an info line) is a build error. v23 prints
    it at d64 (its polynomial's integer last step lands in a wgmma accumulator register) and lists it in
    allow_ptxas, as its record; the same rung without the allowance does not build. v29, the same split with
    exp2_poly_fmul (an FMUL last), builds clean."""
    import dataclasses

    monkeypatch.setenv("WHOWAITS_BUILD_DIR", str(tmp_path))
    v23 = registry.get("v23_exp2_poly")
    assert v23.allow_ptxas == ("C7511",)
    cfg = v23.config_for(64, "fp16", False)
    res = build.build(v23, cfg)
    assert "(C7511)" in res.ptxas_log and res.sass_opcodes["WARPGROUP"] > 10 * 3  # an arrive/wait per wgmma
    with pytest.raises(WhowaitsError, match=r"C7511"):
        build.build(dataclasses.replace(v23, allow_ptxas=()), cfg)
    v29 = registry.get("v29_poly_regs")
    clean = build.build(v29, v29.config_for(64, "fp16", False))
    assert "(C7511)" not in clean.ptxas_log and clean.sass_opcodes["WARPGROUP"] == 10
    assert clean.sass_opcodes["MUFU"] == res.sass_opcodes["MUFU"]  # the same exponentials moved off the MUFU


@needs_nvcc
@pytest.mark.parametrize("vid,must,must_not", [
    ("v08", ("UTMALDG", "SYNCS", "HMMA", "LDSM"), ("LDGSTS", "HGMMA")),
    ("v09", ("UTMALDG", "SYNCS", "HGMMA"), ("HMMA", "LDSM", "LDGSTS")),
])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_hopper_rungs_static_sass(vid, must, must_not, head_dim):
    ver = registry.get(vid)
    res = build.build(ver, ver.config_for(head_dim, "fp16", False))
    ops = res.sass_opcodes
    assert all(o in ops for o in must), sorted(ops)
    assert not any(o in ops for o in must_not), sorted(ops)
    assert res.spill_bytes == 0, res.ptxas_log[-300:]
    assert build.fatal_warnings(res.ptxas_log) == []
    (demangled,) = sass.demangle([res.entry])
    assert registry.parse_kernel_name(demangled) == (ver.id, res.config)
    assert registry.parse_kernel_name(res.entry) == (ver.id, res.config)
    if vid == "v09":
        # one HGMMA per k16 step: head_dim / 16 for QK^T, block_n / 16 for PV (16 at d128, 12 at d64)
        assert ops["HGMMA"] == head_dim // 16 + res.config.block_n // 16


@needs_nvcc
def test_freshness_reads_wgmma_opcodes_whole():
    """profiler.freshness compares opcodes offset by offset; wgmma's carry a lowercase shape
    (HGMMA.64x128x16.F32), which the opcode pattern once cut to HGMMA.64."""
    from profiler import freshness

    res = build.build(registry.get("v09"))
    ops = set(freshness.cubin_opcodes(res.cubin).values())
    assert "HGMMA.64x128x16.F32" in ops and "HGMMA.64" not in ops


def test_causal_override_and_fitting_o_layout(tmp_path):
    """v25's [config.d128_causal] keeps 128 x 128 under a causal mask; tma_q2_kv_o_fit drops the O staging tile
    only where two Q buffers, the K/V ring and the staging tile would pass the 227 KB a CTA may have."""
    v25 = registry.get("v25_wide_kv")
    wide, causal = v25.config_for(128, "fp16", False), v25.config_for(128, "bf16", True)
    assert (wide.block_m, wide.block_n, wide.consumers) == (128, 160, 2)
    assert (causal.block_m, causal.block_n, causal.consumers) == (128, 128, 2)
    assert v25.config_for(64, "fp16", True) == v25.config_for(64, "fp16", False).replace(causal=True)
    assert v25.config_for(64, "fp16", False).block_m == 192
    # 128 x 160: 2 x 32 KB Q + 4 x 40 KB K/V + 1 KB = 230,400 B; with O's 32 KB it would be 263,168 B
    assert wide.smem_bytes("tma_q2_kv_o") == 263168 and wide.smem_bytes("tma_q2_kv_o_fit") == 230400
    assert causal.smem_bytes("tma_q2_kv_o_fit") == causal.smem_bytes("tma_q2_kv_o") == 230400
    # the override is parsed from any d{D}_causal table and may set only the family's fields
    _write(tmp_path, "v01_a", BODY.format(extra='family = "ws"\nabi = "tensor_maps_persistent_o"', unit="consumers = 2")
           + "[config.d128_causal]\nblock_n = 64\n")
    (v,) = registry.versions(tmp_path)
    assert v.config_for(128, "fp16", True).block_n == 64 and v.config_for(128, "fp16", False).block_n == 128
    bad = tmp_path / "bad"
    _write(bad, "v01_b", BODY.format(extra='family = "ws"', unit="consumers = 2") + "[config.d128_causal]\ncausal = false\n")
    with pytest.raises(WhowaitsError, match="may set only"):
        registry.versions(bad)


@needs_nvcc
def test_v25_static_sass():
    """v25 at d128 non-causal: 8 QK^T k16 steps of N = 160 + 10 PV steps, as 8 (first tile) + 2 x 18 (the loop and the
    cross-tile batch) + 10 (the last PV) HGMMA, no spill, no fatal ptxas warning; its causal and d64 builds run v21's
    instructions (the same opcode counts: 3768 and 2872 on nvcc 13.0)."""
    v21, v25 = registry.get("v21_causal_pairs"), registry.get("v25_wide_kv")
    res = build.build(v25, v25.config_for(128, "fp16", False))
    assert res.sass_opcodes["HGMMA"] == 8 + 2 * (8 + 10) + 10
    assert res.spill_bytes == 0 and build.fatal_warnings(res.ptxas_log) == []
    assert "C7511" not in res.ptxas_log and "C7510" not in res.ptxas_log
    assert "STG" not in res.sass_opcodes and res.sass_opcodes["UTMASTG"] == 4
    for head_dim, causal in ((128, True), (64, False)):
        a = build.build(v21, v21.config_for(head_dim, "fp16", causal))
        b = build.build(v25, v25.config_for(head_dim, "fp16", causal))
        assert a.sass_opcodes == b.sass_opcodes


@needs_nvcc
def test_v26_static_sass():
    """v26 without a causal mask: clusters of 2 (EIATTR_CTA_PER_CLUSTER in the cubin via __cluster_dims__), each
    producer's K/V slices as multicast TMA loads, the consumers' releases on the peer's empty barrier as remote
    arrives, the cluster barrier at start and exit; no spill, no C7510/C7511 and no fatal ptxas warning; the
    consumers' steady loop keeps v21's HGMMA / MUFU counts. Causal builds are v21's instructions exactly."""
    v21, v26 = registry.get("v21_causal_pairs"), registry.get("v26_kv_multicast")
    for head_dim in (128, 64):
        res = build.build(v26, v26.config_for(head_dim, "fp16", False))
        base = build.build(v21, v21.config_for(head_dim, "fp16", False))
        assert res.spill_bytes == 0 and build.fatal_warnings(res.ptxas_log) == []
        assert "C7511" not in res.ptxas_log and "C7510" not in res.ptxas_log
        text = sass.sass_text(res.cubin)
        assert "UTMALDG.3D.MULTICAST" in text and "SYNCS.ARRIVE.TRANS64.RED" in text
        assert "UCGABAR_ARV" in text and "UCGABAR_WAIT" in text
        for op in ("HGMMA", "MUFU", "UTMASTG"):
            assert res.sass_opcodes[op] == base.sass_opcodes[op], op
    for head_dim in (128, 64):
        a = build.build(v21, v21.config_for(head_dim, "bf16", True))
        b = build.build(v26, v26.config_for(head_dim, "bf16", True))
        assert a.sass_opcodes == b.sass_opcodes
