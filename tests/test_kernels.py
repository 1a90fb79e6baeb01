"""Kernel ladder without a GPU: registry, configs, real nvcc builds, ptxas resources, static SASS facts.

Every version's default config is built once per session with the real nvcc (cached on disk by
kernels.build), so the whole file costs a few seconds after the first run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels import build, registry, sass
from kernels.config import FwdConfig, Shape
from clirun import whowaits
from conftest import needs_nvcc
from profiler.errors import WhowaitsError

VERSIONS = registry.versions()
IDS = [v.id for v in VERSIONS]


@pytest.fixture(scope="session")
def built():
    """Default-config build of every version (parallel, cached)."""
    results = build.build_many([(v, None) for v in VERSIONS])
    return dict(zip(IDS, results))


# --- config -------------------------------------------------------------------------------------------
def test_template_args_and_short_form():
    c = FwdConfig(128, 128, 64, 4, 2, False, "fp16")
    assert c.template_args() == "__half, 128, 128, 64, 4, 2, false"
    assert c.short_form() == "d128_m128_n64_w4_s2_fp16"
    assert FwdConfig(64, 64, 32, 4, 1, True, "bf16").template_args() == "__nv_bfloat16, 64, 64, 32, 4, 1, true"


@pytest.mark.parametrize(
    "name",
    [
        "void whowaits::v07_tuned::flash_fwd<__half, 128, 128, 64, 4, 2, false>(const __half *, const __half *, "
        "const __half *, __half *, int, float)",
        "whowaits::v07_tuned::flash_fwd<__half, (int)128, (int)128, (int)64, (int)4, (int)2, (bool)0>",
        "void whowaits::v07_tuned::flash_fwd<__half, (int)128, (int)128, (int)64, (int)4, (int)2, (bool)0>"
        "(const T1 *, const T1 *, const T1 *, T1 *, int, float)",
    ],
)
def test_from_kernel_name_spellings(name):
    vid, cfg = FwdConfig.from_kernel_name(name)
    assert vid == "v07_tuned"
    assert cfg == FwdConfig(128, 128, 64, 4, 2, False, "fp16")


def test_from_kernel_name_mangled_and_ncu_display_name():
    mangled = "_ZN8whowaits15v02_smem_tiling9flash_fwdI6__halfLi128ELi32ELi16ELi8ELi1ELb0EEEvPKT_S5_S5_PS3_if"
    cfg = FwdConfig(128, 32, 16, 8, 1, False, "fp16")
    assert FwdConfig.from_kernel_name(mangled) == ("v02_smem_tiling", cfg)
    # what ncu printed for that launch on the H200 (namespace dropped): config parses, version unknown
    shown = "void flash_fwd<__half, 128, 32, 16, 8, 1, 0>(const T1 *, const T1 *, const T1 *, T1 *, int, float)"
    assert FwdConfig.from_kernel_name(shown) == (None, cfg)


def test_from_kernel_name_bf16_causal_ncu_spelling():
    vid, cfg = FwdConfig.from_kernel_name("whowaits::v03_mma::flash_fwd<__nv_bfloat16, (int)64, (int)64, (int)32, (int)4, (int)1, (bool)1>")
    assert (vid, cfg) == ("v03_mma", FwdConfig(64, 64, 32, 4, 1, True, "bf16"))


@pytest.mark.parametrize("bad", ["flash_attn_fwd_kernel<...>", "whowaits::v01_x::flash_fwd<__half, 1, 2>(int)",
                                 "whowaits::v01_x::flash_fwd<float, 1, 2, 3, 4, 5, false>("])
def test_from_kernel_name_rejects(bad):
    with pytest.raises(WhowaitsError):
        FwdConfig.from_kernel_name(bad)


def test_smem_bytes_layouts():
    c = FwdConfig(128, 128, 64, 4, 2, False, "fp16")
    assert c.smem_bytes("none") == 0
    assert c.smem_bytes("kv") == 2 * 2 * 64 * 128 * 2
    assert c.smem_bytes("q_kv") == (128 + 2 * 2 * 64) * 128 * 2
    with pytest.raises(WhowaitsError):
        c.smem_bytes("tma")


def test_config_validation():
    with pytest.raises(WhowaitsError):
        FwdConfig(dtype="fp8")
    with pytest.raises(WhowaitsError):
        FwdConfig(block_m=0)


def test_shape_roundtrip_and_flops():
    for key in ("b1_h64_s1024_d128_fp16", "b4_h16_s4096_d128_bf16_causal", "b2_h3_s1_d64_fp16"):
        assert Shape.parse(key).key == key
    s = Shape.parse("b1_h64_s1024_d128_fp16")
    assert s.flops() == 4 * 64 * 1024 * 1024 * 128 == 3.4359738368e10
    assert Shape.parse("b1_h64_s1024_d128_fp16_causal").flops() == s.flops() / 2
    for bad in ("b1_h64_s1024_d128", "b1_h64_s1024_d128_fp32", "x", "b0_h1_s1_d64_fp16"):
        with pytest.raises(WhowaitsError):
            Shape.parse(bad)


# --- registry -----------------------------------------------------------------------------------------
def test_registry_order_and_lookup():
    assert IDS == sorted(IDS) and len(IDS) >= 2
    assert IDS[:2] == ["v01_naive", "v02_smem_tiling"]
    assert registry.get("v02").id == "v02_smem_tiling"
    for v in VERSIONS:
        assert v.parent in ("", *IDS), f"{v.id}: parent {v.parent!r} unknown"


def test_registry_unknown_lists_known():
    with pytest.raises(WhowaitsError, match="known versions: v01_naive"):
        registry.get("v99_nope")


def _write_version(root: Path, vid: str, toml: str) -> None:
    (root / vid).mkdir(parents=True)
    (root / vid / "kernel.cu").write_text("// empty\n")
    (root / vid / "version.toml").write_text(toml)


GOOD = """id = "{vid}"
parent = ""
title = "t"
change = "c"
hypothesis = "h"
expected_bottleneck = "b"
arch = "sm_90a"
smem_layout = "kv"
[config]
head_dim = 128
block_m = 64
block_n = 64
warps = 4
stages = 1
[config.d64]
block_m = 128
"""


def test_registry_validates_fields(tmp_path):
    _write_version(tmp_path, "v01_ok", GOOD.format(vid="v01_ok"))
    (v,) = registry.versions(tmp_path)
    assert v.config_for(64, "bf16", True) == FwdConfig(64, 128, 64, 4, 1, True, "bf16")
    assert v.config_for(128, "fp16", False).block_m == 64
    with pytest.raises(WhowaitsError, match="does not support head_dim=96"):
        v.config_for(96, "fp16", False)

    # (the version id written, what of GOOD's text is replaced, the error expected): one bad folder each
    bad_cases = [
        ("v02_bad", ('arch = "sm_90a"', 'arch = "sm_99"'), "arch"),
        ("v03_other", ("", ""), "folder name"),  # an id that is not its folder's name (v03_bad)
        ("v04_bad", ("warps = 4", "wraps = 4"), "unknown \\[config\\] field 'wraps'"),
        ("v05_bad", ('title = "t"\n', ""), "'title'"),
        # Q boxes of 64 rows need a tensor-map ABI (GOOD is a pointer-ABI rung), and only 0 or 64 rows are known
        ("v06_bad", ('title = "t"\n', 'title = "t"\nq_box_rows = 64\n'),
         "q_box_rows 64: 0 \\(block_m\\) or 64, and only with a tensor-map abi"),
        ("v07_bad", ('title = "t"\n', 'title = "t"\nq_box_rows = 48\n'), "q_box_rows 48"),
    ]
    for k, (vid, (old, new), match) in enumerate(bad_cases):
        folder = tmp_path / f"bad{k}"
        _write_version(folder, f"v0{k + 2}_bad", GOOD.format(vid=vid).replace(old, new) if old else GOOD.format(vid=vid))
        with pytest.raises(WhowaitsError, match=match):
            registry.versions(folder)


# --- build (real nvcc) --------------------------------------------------------------------------------
def test_parse_ptxas_sample():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function '_ZN8whowaits3foo9flash_fwdEv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _ZN8whowaits3foo9flash_fwdEv\n"
        "    24 bytes stack frame, 16 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 400 bytes cmem[0]\n"
    )
    assert build.parse_ptxas(log) == {
        "entry": "_ZN8whowaits3foo9flash_fwdEv",
        "registers": 255,
        "smem_static_bytes": 1024,
        "stack_bytes": 24,
        "spill_store_bytes": 16,
        "spill_load_bytes": 8,
        "barriers": 1,
    }


@needs_nvcc
@pytest.mark.parametrize("vid", IDS)
def test_version_builds_with_claimed_static_facts(built, vid):
    ver = registry.get(vid)
    res = built[vid]
    assert not isinstance(res, WhowaitsError), str(res)
    assert res.cubin.is_file() and res.cubin.stat().st_size > 0
    assert 0 < res.registers <= 255
    assert res.smem_dynamic_bytes == ver.config.smem_bytes(ver.smem_layout)
    if not ver.allow_spills:
        assert res.spill_bytes == 0, f"{vid} spills {res.spill_bytes} B: {res.ptxas_log[-300:]}"
    assert res.registers * res.config.threads <= 65536
    assert res.smem_bytes <= 227 * 1024
    ops = res.sass_opcodes
    assert sum(ops.values()) > 20 and "EXIT" in ops
    missing = [o for o in ver.expect_sass if o not in ops]
    assert not missing, f"{vid} claims {missing} in its SASS; found {sorted(ops)}"
    forbidden = [o for o in ver.forbid_sass if o in ops]
    assert not forbidden, f"{vid} forbids {forbidden} but its SASS has them"


@needs_nvcc
@pytest.mark.parametrize("vid", IDS)
def test_demangled_cubin_name_roundtrips(built, vid):
    res = built[vid]
    (demangled,) = sass.demangle([res.entry])
    assert demangled.startswith("void whowaits::"), demangled
    # each version's name parses back in its own config family (fwd: FwdConfig, wg: WgConfig)
    assert registry.parse_kernel_name(demangled) == (vid, res.config)
    assert registry.parse_kernel_name(res.entry) == (vid, res.config)
    assert type(res.config).from_kernel_name(demangled) == (vid, res.config)


@needs_nvcc
def test_build_cache_hit_and_compile_error(tmp_path, monkeypatch):
    ver = registry.get("v01")
    monkeypatch.setenv("WHOWAITS_BUILD_DIR", str(tmp_path))
    first = build.build(ver)
    again = build.build(ver)
    assert not first.cached and again.cached and again.cubin == first.cubin
    # block_m not a multiple of warps trips v01's static_assert: one clear line, no cache entry left
    with pytest.raises(WhowaitsError, match="does not compile: .*block_m must be a multiple of warps"):
        build.build(ver, ver.config.replace(block_m=6))
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.cubin.parent.name]


@needs_nvcc
def test_sass_text_is_read_once_per_cubin_and_a_damaged_entry_is_read_again(built, tmp_path, monkeypatch):
    """kernels.sass.sass_text keys on the cubin's bytes: the same bytes under another name are served
    without cuobjdump (in this process and from the sealed disk entry), other bytes are not, and an entry
    with one flipped byte is deleted and read again (never served)."""
    import shutil
    import subprocess

    monkeypatch.setenv("WHOWAITS_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(sass, "_TEXTS", {})
    cubin = built["v01_naive"].cubin
    runs = []
    real_run = subprocess.run

    def counting_run(cmd, *a, **kw):
        runs.append(cmd)
        return real_run(cmd, *a, **kw)

    monkeypatch.setattr(sass.subprocess, "run", counting_run)
    text = sass.sass_text(cubin)
    assert len(runs) == 1 and "code for sm_90a" in text and "SHFL" in text
    copy = tmp_path / "renamed.cubin"
    shutil.copy(cubin, copy)
    assert sass.sass_text(copy) == text and len(runs) == 1  # this process's layer
    (entry,) = (tmp_path / "sass").iterdir()
    monkeypatch.setattr(sass, "_TEXTS", {})
    assert sass.sass_text(copy) == text and len(runs) == 1  # the disk layer
    blob = bytearray(entry.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    entry.write_bytes(bytes(blob))
    monkeypatch.setattr(sass, "_TEXTS", {})
    assert sass.sass_text(copy) == text and len(runs) == 2  # the damaged entry was not trusted
    from profiler import cachefile

    assert cachefile.read(entry) is not None  # and was written again, sealed
    other = built["v03_tensor_cores"].cubin
    assert sass.sass_text(other) != text and len(runs) == 3


def test_build_cache_is_never_inside_site_packages(tmp_path, monkeypatch):
    """A checkout keeps its builds beside the sources (what the device scripts carry); an installed wheel (no
    checkout) in the user's cache folder, not under site-packages; $WHOWAITS_BUILD_DIR wins over both."""
    import profiler.paths

    monkeypatch.delenv("WHOWAITS_BUILD_DIR", raising=False)
    monkeypatch.setenv("WHOWAITS_CACHE_DIR", str(tmp_path / "user"))
    assert build.cache_dir() == Path(build.KERNELS_DIR).parent / ".cache" / "whowaits" / "build"
    monkeypatch.setattr(profiler.paths, "checkout", lambda: None)
    assert build.cache_dir() == tmp_path / "user" / "build"
    monkeypatch.setenv("WHOWAITS_BUILD_DIR", str(tmp_path / "b"))
    assert build.cache_dir() == tmp_path / "b"


@needs_nvcc
def test_cli_kernels_build_json(built):
    import json

    proc = whowaits("kernels", "build", "v01", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["version"] == "v01_naive"
    assert row["registers"] == built["v01_naive"].registers
    assert row["spill_bytes"] == 0 and row["smem_bytes"] == 0
    assert row["sass_opcodes"]["SHFL"] > 0


def test_cli_unknown_version_one_line():
    proc = whowaits("kernels", "build", "v99")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "whowaits: error: unknown kernel version 'v99'; known versions: " + ", ".join(IDS)
    ]


@pytest.mark.parametrize("cmd", [["kernels", "list"], ["kernels", "build"], ["bench"], ["tune"]])
def test_cli_commands_have_help(cmd):
    proc = whowaits(*cmd, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout and len(proc.stdout) > 200


def test_cli_kernels_list_csv():
    proc = whowaits("kernels", "list", "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "id,title,change,config"
    assert [ln.split(",", 1)[0] for ln in lines[1:]] == IDS
