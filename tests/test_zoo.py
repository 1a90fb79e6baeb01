"""The zoo (reports/h200/zoo/): production kernels nobody here wrote, profiled on the H200 with
``whowaits profile --cmd`` (scripts/zoo_subjects.py, scripts/device/h200_zoo.sh; docs/zoo.md).

What is held here: every subject of the plan has its report and a sidecar that says how it was taken; the
kernel ncu took is the subject's library kernel (by its regex); every raw number ``show`` prints equals ncu's
own: the CLI's raw page (tests/golden/zoo/*.raw.csv.gz, ``ncu --import F --page raw --csv``), its source page
(``--page source --csv --print-source sass``, per PC) and the values ``ncu_report`` returns; and which
kernels are warp-specialised (setmaxnreg in their SASS). Role graphs, regions and barrier families on the
same reports are tested beside the code that computes them.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "reports" / "h200" / "zoo"
GOLDEN = ROOT / "tests" / "golden" / "zoo"


def _subjects_module():
    spec = importlib.util.spec_from_file_location("zoo_subjects", ROOT / "scripts" / "zoo_subjects.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("zoo_subjects", mod)  # dataclasses look their module up there
    spec.loader.exec_module(mod)  # no torch at import: the plan is plain data
    return mod


SUBJECTS = _subjects_module().SUBJECTS
NAMES = [s.name for s in SUBJECTS]
_BY_NAME = {s.name: s for s in SUBJECTS}


def _report(name: str) -> Path:
    s = _BY_NAME[name]
    return ZOO / s.name / f"{s.shape}.ncu-rep"


def _stem(name: str) -> str:
    return f"{name}_{_BY_NAME[name].shape}"


@cache
def raw(name: str) -> dict[str, tuple[str, str]]:
    """ncu's raw page of the one launch: metric -> (unit, value text)."""
    with gzip.open(GOLDEN / f"{_stem(name)}.raw.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 3, "one launch per zoo report"
    return {h: (u, v) for h, u, v in zip(*rows)}


@cache
def source_page(name: str) -> tuple[str, tuple[dict, ...]]:
    """ncu's source page with SASS: (kernel name, one row per instruction slot)."""
    with gzip.open(GOLDEN / f"{_stem(name)}.source-sass.csv.gz", "rt", newline="") as f:
        rows = list(csv.reader(f))
    head = rows[1]
    return rows[0][1], tuple(dict(zip(head, r)) for r in rows[2:] if len(r) == len(head))


@cache
def summary(name: str) -> dict:
    from profiler.analyze import summarize

    (s,) = summarize(_report(name))
    return s


@cache
def launch(name: str):
    from profiler.report import load_report

    (lc,) = load_report(_report(name)).launches
    return lc


def _num(text: str) -> float:
    return float(text.replace(",", ""))


_NS = {"ns": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9}


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.strip("()").split(","))


# ------------------------------------------------------------------------------------------------
# the collection
def test_every_subject_has_its_report_and_sidecar():
    """The plan and the committed zoo agree one to one; each sidecar records how ncu took the launch."""
    on_disk = sorted(p.parent.name for p in ZOO.glob("*/*.ncu-rep"))
    assert on_disk == sorted(NAMES)
    assert len(NAMES) >= 10
    for s in SUBJECTS:
        rep = _report(s.name)
        side = json.loads(rep.with_suffix(".json").read_text())
        assert side["version"] == s.name and side["shape"] == s.shape
        assert side["gpu"] == "NVIDIA H200" and side["ncu_version"] == "2025.3.1.0"
        assert side["clock_control"] == "none" and side["section_set"] == "whowaits"
        assert side["launch_count"] == 1 and side["launch_skip"] == 0
        assert side["nvtx_include"] == [s.nvtx_range + "/"]
        assert side["kernel_filter"] == "regex:" + s.kernel_regex
        assert side["problem_flops"] == s.flops
        assert side["report_sha256"] == hashlib.sha256(rep.read_bytes()).hexdigest()
        cmd = side["ncu_command"]
        assert cmd[cmd.index("--import-source") + 1] == "yes"
        assert cmd[-2:] == ["scripts/zoo_subjects.py", s.name]
        assert re.fullmatch(r"[0-9a-f]{40}", side["git_commit"]) and side["git_dirty"] is False


# the library kernel each subject's call ran, as ncu named it (tests/golden/zoo/*.raw.csv.gz, 2026-12-02):
# cuBLAS 13.1 picked nvjet kernels for every torch.matmul and both _scaled_mm calls (also the row-wise one),
# torch's grouped mm is CUTLASS's ptr-array TMA warp-specialised kernel, cuDNN 9.19 a "knob 7" fprop.
KERNELS = {
    "cublas-gemm-fp16": "nvjet_sm90_hsh_320x128_64x3_1x2_h_bz_coopB_NNT",
    "cublas-gemm-bf16": "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT",
    "cublas-gemm-fp8": "nvjet_sm90_qqtst_144x128_128x6_1x2_h_bz_coopA_algo2_TNN",
    "cublas-gemm-skinny": "nvjet_sm90_hsh_128x64_64x8_1x2_h_bz_NNT",
    "scaled-mm-fp8-rowwise": "nvjet_sm90_qqtst_128x128_128x6_1x1_h_bz_coopA_algo2_ovscale_TNT",
    "cutlass-grouped-mm": "device_kernel<enable_3x_kernel_for_sm9x<GemmUniversal<GroupProblemShape<",
    "triton-matmul": "zoo_matmul",
    "triton-matmul-ws": "zoo_matmul_ws",
    "flex-attention": "triton_tem_fused_flex_attention_0",
    "inductor-softmax": "triton_red_fused__softmax_exp_prepare_softmax_online_sub_0",
    "cudnn-sdpa-d64": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64",
}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_is_the_libraries_and_matches_the_regex(name):
    """ncu matched the subject's regex on the full demangled name (what whowaits shows); its raw page
    prints the name without namespaces (CUTLASS's ``void device_kernel<…>``)."""
    kernel = summary(name)["kernel"]
    assert re.search(_BY_NAME[name].kernel_regex, kernel)
    short = raw(name)["Kernel Name"][1]
    assert short.removeprefix("void ").startswith(KERNELS[name]), short
    assert kernel == short or "cutlass::device_kernel<at::cuda::detail::enable_3x_kernel_for_sm9x<" in kernel


# ------------------------------------------------------------------------------------------------
# every raw number equals ncu's own
@pytest.mark.parametrize("name", NAMES)
def test_launch_and_duration_equal_ncu_raw_page(name):
    s, g = summary(name), raw(name)
    unit, text = g["gpu__time_duration.sum"]
    assert s["duration_ns"] == pytest.approx(_num(text) * _NS[unit], rel=1e-9)
    lc = s["launch"]
    assert tuple(lc["grid"]) == _dims(g["Grid Size"][1])
    assert tuple(lc["block"]) == _dims(g["Block Size"][1])
    assert tuple(lc["cluster"]) == tuple(int(_num(g[f"launch__cluster_dim_{a}"][1])) for a in "xyz")
    assert lc["registers_per_thread"] == _num(g["launch__registers_per_thread"][1])
    assert lc["waves_per_sm"] == pytest.approx(_num(g["launch__waves_per_multiprocessor"][1]), abs=0.005)  # printed to 2 digits


@pytest.mark.parametrize("name", NAMES)
def test_stall_samples_equal_ncu_raw_page(name):
    """Per reason and in total: whowaits' sampled stalls are ncu's smsp__pcsamp_* counters."""
    s, g = summary(name), raw(name)
    for reason, v in s["stall_samples"].items():
        assert v == _num(g[f"smsp__pcsamp_warps_issue_stalled_{reason}"][1]), reason
    total = _num(g["smsp__pcsamp_sample_count"][1])
    assert sum(s["stall_samples"].values()) == total
    assert total > 3000  # enough samples to read: the smallest (skinny GEMM, 36 us) has 3,690
    assert sum(c["samples"] for c in s["who_waits"]) == total


def _head(sass: str) -> str:
    """Guard and full opcode of a SASS line: ``@!P0 BRA 0x…`` -> ``@!P0 BRA``."""
    words = sass.split()
    return " ".join(words[:2] if words and words[0].startswith("@") else words[:1])


@pytest.mark.parametrize("name", NAMES)
def test_per_pc_sass_samples_and_counts_equal_ncu_source_page(name):
    """Every instruction slot: the same opcode, ncu's 'Warp Stall Sampling (All Samples)' and
    'Instructions Executed' at the same address; the top instruction is ncu's hottest PC. (Operands are
    compared by opcode and guard only: the PyPI reader's disassembler prints wgmma's scoreboard operand
    as ``R24.gsb0`` where ncu 2025.3's CLI prints ``R24, gsb0``.)"""
    _, rows = source_page(name)
    sass = launch(name).sass
    assert len(sass) == len(rows)
    ours = {int(a): (_head(t), int(n), int(e)) for a, t, n, e in
            zip(sass["address"], sass["sass"], sass["samples"], sass["inst_executed"])}
    theirs = {int(r["Address"], 16): (_head(r["Source"]), int(_num(r["Warp Stall Sampling (All Samples)"])),
                                      int(_num(r["Instructions Executed"]))) for r in rows}
    assert ours.keys() == theirs.keys()
    for pc, got in ours.items():
        assert got == theirs[pc], hex(pc)
    top = summary(name)["top_instructions"][0]
    base = min(theirs)
    assert theirs[base + top["offset"]][1] == top["samples"] == max(v[1] for v in theirs.values())


@pytest.mark.parametrize("name", NAMES)
def test_numbers_equal_ncu_report_reader(name):
    """The same numbers read straight through ncu's own Python reader, not through whowaits."""
    import ncu_report

    ctx = ncu_report.load_report(str(_report(name)))
    assert ctx.num_ranges() == 1 and ctx.range_by_idx(0).num_actions() == 1
    act = ctx.range_by_idx(0).action_by_idx(0)
    s = summary(name)

    def val(metric: str) -> float:
        return act.metric_by_name(metric).as_double()

    assert s["duration_ns"] == val("gpu__time_duration.sum")
    assert tuple(s["launch"]["grid"]) == tuple(int(val(f"launch__grid_dim_{a}")) for a in "xyz")
    assert tuple(s["launch"]["block"]) == tuple(int(val(f"launch__block_dim_{a}")) for a in "xyz")
    assert sum(s["stall_samples"].values()) == val("smsp__pcsamp_sample_count")
    per_pc = act.metric_by_name("smsp__pcsamp_sample_count")  # instanced by PC
    assert sum(per_pc.as_uint64(i) for i in range(per_pc.num_instances())) == val("smsp__pcsamp_sample_count")


@pytest.mark.parametrize("name", NAMES)
def test_show_prints_ncus_numbers(name):
    """What `show` prints (table and JSON) carries the same duration, grid and sample count."""
    from typer.testing import CliRunner

    from profiler.cli import app

    g = raw(name)
    res = CliRunner().invoke(app, ["show", str(_report(name)), "--format", "json"])
    assert res.exit_code == 0, res.output
    (got,) = json.loads(res.stdout)
    unit, text = g["gpu__time_duration.sum"]
    assert got["duration_ns"] == pytest.approx(_num(text) * _NS[unit], rel=1e-9)
    assert sum(got["stall_samples"].values()) == _num(g["smsp__pcsamp_sample_count"][1])
    res = CliRunner().invoke(app, ["show", str(_report(name))], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    us = _num(text) * _NS[unit] / 1e3
    assert f"duration {us:,.2f} µs" in res.output
    assert "grid [{}, {}, {}]".format(*_dims(g["Grid Size"][1])) in res.output


# ------------------------------------------------------------------------------------------------
# warp specialisation
# setmaxnreg in the SASS (hand-read on ncu's source page, 2026-12-02): nvjet's cooperative kernels and the
# row-wise fp8 one, CUTLASS's grouped GEMM and cuDNN's fprop give registers to the MMA warps
# (USETMAXREG.TRY_ALLOC.CTAPOOL, 200/184/232 registers) and take them from the producer
# (USETMAXREG.DEALLOC.CTAPOOL, 24/40); cuDNN has both in two code paths. The skinny nvjet kernel (no
# "coop" in its name), FlexAttention, the inductor reduction and both Triton matmuls have none: Triton 3.6
# keeps `tl.range(..., warp_specialize=True)` one role on Hopper (TMA + mbarrier pipelining in every warp).
WARP_SPECIALISED = {
    "cublas-gemm-fp16": (0xC8, 0x18),
    "cublas-gemm-bf16": (0xC8, 0x18),
    "cublas-gemm-fp8": (0xB8, 0x18),
    "scaled-mm-fp8-rowwise": (0xC8, 0x18),
    "cutlass-grouped-mm": (0xE8, 0x28),
    "cudnn-sdpa-d64": (0xE8, 0x28),
    "cublas-gemm-skinny": None,
    "triton-matmul": None,
    "triton-matmul-ws": None,
    "flex-attention": None,
    "inductor-softmax": None,
}


def test_the_ws_table_names_every_subject():
    assert sorted(WARP_SPECIALISED) == sorted(NAMES)
    assert sum(v is not None for v in WARP_SPECIALISED.values()) >= 5


@pytest.mark.parametrize("name", NAMES)
def test_setmaxnreg_present_exactly_in_the_warp_specialised_kernels(name):
    """Our SASS frame and ncu's source page find the same setmaxnreg instructions, with the register counts
    written above; a kernel without them is not warp-specialised by setmaxnreg."""
    _, rows = source_page(name)
    theirs = sorted(" ".join(r["Source"].split()) for r in rows if "USETMAXREG" in r["Source"])
    sass = launch(name).sass
    ours = sorted(" ".join(t.split()) for t, b in zip(sass["sass"], sass["base"]) if b == "USETMAXREG")
    assert ours == theirs
    want = WARP_SPECIALISED[name]
    if want is None:
        assert ours == []
        return
    inc, dec = want
    alloc = [t for t in ours if t.startswith("USETMAXREG.TRY_ALLOC")]
    dealloc = [t for t in ours if t.startswith("USETMAXREG.DEALLOC")]
    assert alloc and dealloc
    assert all(int(t.rsplit(",", 1)[-1].strip(" ;"), 16) == inc for t in alloc)
    assert all(int(t.split()[-1].strip(" ;"), 16) == dec for t in dealloc)
    assert launch(name).sass.loc[launch(name).sass["base"] == "USETMAXREG", "inst_executed"].sum() > 0


# ------------------------------------------------------------------------------------------------
# the opcode data knows every instruction of the zoo
@pytest.mark.parametrize("name", NAMES)
def test_opcode_classes_name_every_zoo_opcode(name):
    """Every base opcode in a zoo kernel is named by profiler/data/opcode_classes.toml (none falls into
    OTHER by default), and OTHER holds only NOP and setmaxnreg."""
    from profiler import metrics as M

    listed = M.known_base_opcodes()
    bases = set(launch(name).sass["base"])
    assert bases <= listed, sorted(bases - listed)
    other = set(launch(name).sass.loc[launch(name).sass["opcode_class"] == "OTHER", "base"])
    assert other <= {"NOP", "USETMAXREG"}


# ------------------------------------------------------------------------------------------------
# the subject script's CPU side (the subjects themselves need torch and a GPU)
def _script(*args: str):
    import subprocess

    return subprocess.run([sys.executable, str(ROOT / "scripts" / "zoo_subjects.py"), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_plan_is_what_the_device_script_reads():
    """`--plan`: one tab-separated line per subject, six fields (name, shape, regex, NVTX range, FLOPs,
    bytes) that `whowaits profile --cmd` accepts: a plain shape key, a valid regex, a positive number or '-'."""
    from profiler.collect import plan_command

    proc = _script("--plan")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split("\t")[0] for ln in lines] == NAMES
    for ln in lines:
        name, shape, regex, nvtx, flops, nbytes = ln.split("\t")
        assert nvtx == "whowaits:zoo-" + name
        assert flops != "-" or nbytes != "-"
        for x in (flops, nbytes):
            assert x == "-" or float(x) > 0
        session = plan_command(f"python3 scripts/zoo_subjects.py {name}", regex, name, shape, nvtx_range=nvtx)
        argv = session.ncu_argv("ncu", "out")
        assert argv[argv.index("--nvtx-include") + 1] == nvtx + "/" and session.shape == shape
    device = (ROOT / "scripts" / "device" / "h200_zoo.sh").read_text()
    assert "read -r name shape regex nvtx flops bytes" in device and "zoo_subjects.py --plan" in device


def test_script_refuses_bad_arguments_in_one_line():
    assert _script("--list").returncode == 0
    for args in ((), ("no-such-subject",), ("cublas-gemm-fp16", "--warmup", "0")):
        proc = _script(*args)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1].startswith("zoo_subjects.py: error: ")
