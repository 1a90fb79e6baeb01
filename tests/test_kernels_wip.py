"""Rungs not landed yet (``kernels/wip/``) without a GPU: each one compiles with the ladder's own build (flags,
ptxas C7508/C7515/C7519 fatal, cache) and keeps its ``version.toml``'s static claims, so a wip rung cannot rot
uncompiled between its writing and its first device run; and none of them enters the registry, the bench, the
reports or the migration (``registry.versions()`` reads ``kernels/v*/`` only).

Also the one static fact v15_softmax_under_pv is built on (found in v14's SASS, nvcc 13.0, 2026-12-01): in v14
ptxas schedules the ``WARPGROUP.DEPBAR.LE gsb0, 0x0`` of wgmma.wait_group 0 (PV[n-1] done) above the softmax of
S[n] (0 of the 66 MUFU.EX2 between the QK^T wait and the PV wait, in the loop and in the cross-tile batch), so
the softmax never ran under its own PV; v15's re-check of the pending PV's V barrier between softmax(n) and
wait_group 0 (a spin loop: a basic-block boundary) pins it below (all 66 in the loop, 62-63 of 64 in the
cross-tile batch). The test looks v15 up among the landed rungs too, so it keeps holding after v15 lands.
"""

from __future__ import annotations


import pytest

from kernels import build, registry, sass
from conftest import needs_nvcc
from profiler.errors import WhowaitsError

WIP = registry.wip_versions()
WIP_IDS = [v.id for v in WIP]
# the default config, and the other corner of what a rung supports (other head dim, other dtype, causal)
CORNERS = [(v.id, "default") for v in WIP] + [(v.id, "corner") for v in WIP]


def _config(v: registry.Version, which: str):
    if which == "default":
        return v.config_for(v.config.head_dim, v.config.dtype, v.config.causal)
    hd = min(v.head_dims) if v.config.head_dim == max(v.head_dims) else max(v.head_dims)
    dt = next((d for d in v.dtypes if d != v.config.dtype), v.config.dtype)
    return v.config_for(hd, dt, v.causal)


def test_every_wip_folder_with_a_version_toml_is_a_wip_rung():
    # a folder the glob would miss (not named vNN_slug) fails here instead of silently skipping the compile test
    found = sorted(p.parent.name for p in registry.WIP_DIR.glob("*/version.toml"))
    assert found == sorted(WIP_IDS)


def test_wip_rungs_stay_out_of_the_ladder():
    landed = registry.versions()
    ids = {v.id for v in landed}
    numbers = {v.number for v in landed}
    for v in WIP:
        assert v.id not in ids, f"{v.id} is both landed and in kernels/wip/: remove the wip copy when it lands"
        assert v.number not in numbers, f"{v.id}: number {v.number:02d} is taken by a landed rung"
        assert v.parent in ids | set(WIP_IDS), f"{v.id}: parent {v.parent!r} unknown"
        assert not v.verdict.strip() or "not measured" in v.verdict, f"{v.id} has a verdict: land it (kernels/wip/README.md)"
    # what the bench, profile --all, the reports and the migration walk: landed rungs only
    assert not set(WIP_IDS) & {v.id for v in registry.resolve(None)}
    for vid in WIP_IDS:
        with pytest.raises(WhowaitsError, match="unknown kernel version"):
            registry.get(vid)


def test_wip_translation_unit_includes_the_wip_folder():
    # landed rungs keep their include string (their build keys do not move); wip rungs include wip/<id>/kernel.cu
    v14 = registry.get("v14")
    assert f'#include "v14_cross_tile_qk/kernel.cu"' in build.translation_unit(v14, v14.config)
    v07 = registry.get("v07")  # a config-only rung compiles its source's kernel.cu
    assert '#include "v06_softmax_fusion/kernel.cu"' in build.translation_unit(v07, v07.config)
    for v in WIP:
        assert build.source_include(v) == f"wip/{v.source_version or v.id}/kernel.cu"
        assert (registry.KERNELS_DIR / build.source_include(v)).is_file()


@needs_nvcc
@pytest.mark.parametrize("vid, which", CORNERS)
def test_wip_rung_compiles_with_its_static_claims(vid, which):
    (v,) = [w for w in WIP if w.id == vid]
    cfg = _config(v, which)
    r = build.build(v, cfg)  # raises on a compile error or a fatal ptxas warning (C7508/C7515/C7519)
    assert build.static_violations(v, r) == {"spills": [], "expect_sass": [], "forbid_sass": []}, cfg.short_form()
    assert r.registers * cfg.threads <= 65536 and r.smem_bytes <= 227 * 1024
    assert r.smem_dynamic_bytes == cfg.smem_bytes(v.smem_layout)
    (demangled,) = sass.demangle([r.entry])
    assert registry.parse_kernel_name(demangled, root=registry.WIP_DIR) == (v.id, cfg)


# --- v15_softmax_under_pv: where the PV wait sits relative to the softmax -------------------------------------
def mufu_between_qk_and_pv_waits(cubin) -> list[int]:
    """The MUFU.EX2 under each consumer's PV wait (:func:`kernels.sass.mufu_under_pv`) of a built cubin."""
    return sass.mufu_under_pv(sass.instructions(sass.sass_text(cubin)))


def _v15():
    for v in [*registry.versions(), *WIP]:
        if v.id == "v15_softmax_under_pv":
            return v
    pytest.skip("v15_softmax_under_pv is neither landed nor in kernels/wip/")


@needs_nvcc
def test_v15_softmax_runs_before_the_pv_wait_v14_does_not():
    v14, v15 = registry.get("v14"), _v15()
    cfg = v14.config_for(128, "fp16", False)
    # two wait_group 1 sites: the loop's batch and the cross-tile batch; 64 rows x 128 keys / 128 threads = 64
    # exp per thread, + 2 for the rows' alpha in the loop's softmax(n) (the cross-tile softmax(0) of the next
    # tile has alpha = 1: no exp for it)
    assert mufu_between_qk_and_pv_waits(build.build(v14, cfg).cubin) == [0, 0]
    # v15: the loop's all 66; in the cross-tile batch 63 of 64 (62 causal): the compiler leaves the last one or two
    # exps of the next tile's S[0] after the fence, once per tile
    for c in (cfg, v15.config_for(64, "bf16", True)):
        loop, cross = mufu_between_qk_and_pv_waits(build.build(v15, c).cubin)
        assert loop == 66 and 60 <= cross <= 64, (c.short_form(), loop, cross)


@needs_nvcc
def test_v16_issues_its_batch_without_per_step_descriptor_arithmetic():
    """v16_desc_iterator's claim (its version.toml): the loop's batch issue, BAR.SYNC..BAR.ARV, loses the per-k-step
    descriptor shifts and masks (v15: 220 instructions with USHF 16, ULOP3 32, LOP3 14, SHF 7; v16: 157, none of
    the shifts), and keeps v15's softmax-under-PV schedule."""
    import importlib.util

    script = registry.KERNELS_DIR.parent / "scripts" / "sass_loop_counts.py"
    spec = importlib.util.spec_from_file_location("sass_loop_counts", script)
    slc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(slc)
    v16 = next((v for v in [*registry.versions(), *WIP] if v.id == "v16_desc_iterator"), None)
    if v16 is None:
        pytest.skip("v16_desc_iterator is neither landed nor in kernels/wip/")
    f15, f16 = slc.facts(_v15(), 128, "fp16", False), slc.facts(v16, 128, "fp16", False)
    assert f16["issue_phase"].get("USHF", 0) == 0 and f16["issue_phase"].get("SHF", 0) == 0
    assert f16["issue_phase_instructions"] <= f15["issue_phase_instructions"] - 50
    assert f16["issue_phase"]["HGMMA"] == f15["issue_phase"]["HGMMA"] == 16
    assert f16["mufu_ex2_between_qk_wait_and_pv_wait"] == f15["mufu_ex2_between_qk_wait_and_pv_wait"]
    assert (f16["registers"], f16["spill_bytes"]) == (168, 0)
