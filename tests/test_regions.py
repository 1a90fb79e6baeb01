"""Source regions: markers, declared and inferred attribution, exact sums, ncu's own source page.

Fixtures: every committed report. The ladder reports carry line information (-lineinfo builds, ncu
--import-source yes); torch SDPA's FlashAttention-2 and cuDNN kernels do not.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import GOLDEN, ROOT
from profiler.analyze.regions import declared_lines, pc_regions, region_names, regions, regions_json
from profiler.analyze.summary import summarize_launch
from profiler.errors import WhowaitsError
from profiler.report import load_report

SHAPE = "b1_h64_s1024_d128_fp16"
REPORTS = sorted(p for p in (ROOT / "reports/h200").glob(f"*/{SHAPE}.ncu-rep"))
LADDER = [p for p in REPORTS if p.parent.name.startswith("v")]
EXT = [p for p in REPORTS if p.parent.name.startswith("ext-")]
_MARK = re.compile(r"^\s*//\s*@(region|endregion)\b")


def _launch(path):
    return load_report(path).launches[0]


def renumbered_sources(report_files) -> dict:
    """The working tree's marked sources as line tables on the line numbers of the same files without
    their own-line markers: for a report profiled before the markers existed (a marker line is the only
    change the markers made; kernels/common/X.cuh moved to kernels/common/sm80/X.cuh)."""
    from profiler.analyze.regions import _line_table

    out = {}
    for f in report_files:
        if "/kernels/" not in f:
            continue
        rel = f[f.rfind("/kernels/") + len("/kernels/"):]
        if rel.startswith("common/") and not rel.startswith("common/sm"):
            rel = rel.replace("common/", "common/sm80/", 1)
        p = ROOT / "kernels" / rel
        if not p.exists():
            continue
        text = p.read_text()
        table, n = _line_table(text), 0
        ren = {}
        for no, line in enumerate(text.splitlines(), start=1):
            if _MARK.match(line):
                continue
            n += 1
            if no in table:
                ren[n] = table[no]
        out[f] = ren
    return out


def _sources(la):
    """The report's own marked sources when its kernel file is marked there, else the working tree's."""
    from profiler.analyze.regions import _kernel_is_marked

    if la.sources and _kernel_is_marked(la.sources):
        return la.sources
    return renumbered_sources(set(la.sass["source_file"].dropna()))


# --- markers --------------------------------------------------------------------------------------


def test_marker_syntax():
    text = "\n".join([
        "int a;",                      # 1: no region
        "// @region load_q",           # 2
        "  x = q[i];",                 # 3: load_q
        "  __syncthreads();  // @region sync",  # 4: sync (one line)
        "  // a comment // @region qk",  # 5: a comment, not a marker: load_q
        "// @endregion",               # 6
        "y = 1;",                      # 7: none
        "    // @region inherit",      # 8
        "z = 2;",                      # 9: inherit
    ])
    assert declared_lines(text) == {3: "load_q", 4: "sync", 5: "load_q", 9: "inherit"}


def test_unknown_region_name_is_one_error(tmp_path):
    la = _launch(LADDER[0])
    f = next(f for f in set(la.sass["source_file"].dropna()) if f.endswith("kernel.cu"))
    with pytest.raises(WhowaitsError, match="unknown source region.*softmx"):
        pc_regions(la, {f: "\n".join(["__global__ void k();", "// @region softmx"] + ["x;"] * 5000)})


MARKED = ["v01_naive", "v02_smem_tiling", "v03_tensor_cores", "v04_swizzle_cp_async", "v05_double_buffer",
          "v06_softmax_fusion", "v08_tma_mbarrier", "v09_wgmma"]  # v07_tuned compiles v06's kernel.cu


@pytest.mark.parametrize("version", MARKED)
def test_ladder_kernel_sources_declare_regions(version):
    """A reader sees the regions in the code: each kernel.cu marks them, with vocabulary names only."""
    used = set(declared_lines((ROOT / "kernels" / version / "kernel.cu").read_text()).values())
    assert {"qk", "softmax", "pv", "epilogue", "load_kv"} <= used <= set(region_names()) | {"inherit"}


# --- sums -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.parent.name)
def test_regions_sum_exactly_to_the_kernel_totals(path):
    la = _launch(path)
    sources = _sources(la) if path in LADDER else {}
    regs = regions_json(la, sources)
    assert regs and len({r["source"] for r in regs}) == 1  # never mixed
    assert [r["name"] for r in regs] == [n for n in region_names() if n in {r["name"] for r in regs}]
    # kernel totals as ncu reports them: sampled warps and executed instructions
    assert sum(r["samples"] for r in regs) == int(la.value("smsp__pcsamp_sample_count"))
    assert sum(r["inst_executed"] for r in regs) == int(la.value("inst_executed"))
    assert sum(r["share"] for r in regs) == pytest.approx(1.0)
    reasons, mat = la.stall_matrix()
    for j, reason in enumerate(reasons):
        assert sum(r["stall_samples"][reason] for r in regs) == int(mat[:, j].sum())
    assert sum(r["pcs"] for r in regs) == len(la.sass)


@pytest.mark.parametrize("path", EXT, ids=lambda p: p.parent.name)
def test_reports_without_line_info_get_inferred_regions(path):
    la = _launch(path)
    assert la.sass["source_line"].isna().all() and not la.sources
    s = summarize_launch(la)
    assert {r["source"] for r in s["regions"]} == {"inferred"}
    names = {r["name"] for r in s["regions"]}
    assert {"qk", "pv", "softmax"} <= names


def test_inferred_wgmma_split_by_operand_a():
    """cuDNN's HGMMAs: both operands in shared memory (``gdesc`` A) -> qk, a register A (P) -> pv."""
    la = _launch(ROOT / f"reports/h200/ext-sdpa-cudnn/{SHAPE}.ncu-rep")
    names, source, _ = pc_regions(la, {})
    assert source == "inferred"
    for text, name in zip(la.sass["sass"], names):
        if text.lstrip("@!UP0123456789 ").startswith("HGMMA"):
            a = text.split(",")[1].strip()
            assert name == ("qk" if a.startswith("gdesc") else "pv"), text


def _b_from_transposed_ldsm(la) -> list[str]:
    """Hand rule for mma.sync ladders: an HMMA whose B registers were last written by an LDSM .MT88
    (ldmatrix.trans of V) is P V, else Q K^T."""
    last, out = {}, []
    for op, text in zip(la.sass["opcode"], la.sass["sass"]):
        if op.startswith("HMMA"):
            regs = re.findall(r"\bR\d+", text)
            out.append("pv" if "MT88" in last.get(regs[2], "") else "qk")
        if op.startswith("LDSM"):
            d = int(re.findall(r"R(\d+)", text)[0])
            for k in range(4):
                last[f"R{d + k}"] = op
    return out


@pytest.mark.parametrize("version", ["v03_tensor_cores", "v04_swizzle_cp_async", "v05_double_buffer",
                                     "v06_softmax_fusion", "v07_tuned", "v08_tma_mbarrier"])
def test_declared_regions_put_every_mma_where_its_v_or_k_fragment_says(version):
    la = _launch(ROOT / f"reports/h200/{version}/{SHAPE}.ncu-rep")
    names, source, inherited = pc_regions(la, _sources(la))
    assert source == "declared"
    hmma = [n for n, op in zip(names, la.sass["opcode"]) if op.startswith("HMMA")]
    assert hmma == _b_from_transposed_ldsm(la)
    assert hmma.count("qk") == hmma.count("pv") > 0


def test_declared_v09_wgmmas_are_where_their_operand_a_says():
    """v09's markers (kernels/v09_wgmma/kernel.cu) against the SASS rule the inference uses for cuDNN: an
    HGMMA with A from shared memory (``gdesc``) is Q K^T, one with A in registers (P) is P V."""
    la = _launch(ROOT / f"reports/h200/v09_wgmma/{SHAPE}.ncu-rep")
    names, source, _ = pc_regions(la, _sources(la))
    assert source == "declared"
    got = [(n, t.split(",")[1].strip().startswith("gdesc")) for n, t in zip(names, la.sass["sass"])
           if t.lstrip("@!UP0123456789 ").startswith("HGMMA")]
    assert got and all(n == ("qk" if smem_a else "pv") for n, smem_a in got), got
    assert sum(smem_a for _, smem_a in got) == 8 == len(got) - 8  # 8 k16 steps each at D = 128


def test_declared_v01_waits_in_the_products_on_global_loads():
    """v01 (CUDA cores, K and V read from global memory inside the products): its samples sit on the
    math that waits for the loads (long_scoreboard), in qk and pv; docs/ladder.md: 'v01's FP16 math waits on
    global loads'."""
    la = _launch(ROOT / f"reports/h200/v01_naive/{SHAPE}.ncu-rep")
    fr = regions(la, _sources(la)).set_index("region")
    assert fr.loc["qk", "share"] + fr.loc["pv", "share"] > 0.8
    assert fr.loc["qk", "stall_long_scoreboard"] > 0.5 * fr.loc["qk", "samples"]


# --- ncu's own source page -------------------------------------------------------------------------


def _source_page(stem: str) -> dict[int, set[tuple[str, int]]]:
    """``ncu --import F --page source --csv --print-source cuda,sass``: address -> every (file, line) the
    page lists it under (an inlined instruction is listed under each line of its inline chain)."""
    text = gzip.decompress((GOLDEN / f"{stem}.source-cuda-sass.csv.gz").read_bytes()).decode()
    out: dict[int, set] = {}
    f = line = None
    for r in csv.reader(io.StringIO(text)):
        if r and r[0] == "File Path":
            f = r[1]
        elif len(r) > 3 and r[0] != "Line No":
            if r[0]:
                line = int(r[0])
            elif r[2].startswith("0x"):
                out.setdefault(int(r[2], 16), set()).add((f, line))
    return out


def test_line_of_every_pc_is_the_line_ncu_source_page_prints():
    la = _launch(ROOT / f"reports/h200/v07_tuned/{SHAPE}.ncu-rep")
    page = _source_page(f"v07_tuned_{SHAPE}")
    sass = la.sass
    assert set(page) == {int(a) for a in sass["address"] if la.sass is not None} & set(page)
    listed = [int(a) for a in sass["address"] if int(a) in page]
    assert len(listed) == len(page) > 2000
    for a, f, ln in zip(sass["address"], sass["source_file"], sass["source_line"]):
        if int(a) in page:
            assert (f, int(ln)) in page[int(a)], hex(int(a))


def test_marked_headers_alone_do_not_declare_a_kernel():
    """A rung whose kernel.cu has no markers (v08 on the marked sm80 helpers) gets inferred regions."""
    la = _launch(ROOT / f"reports/h200/v07_tuned/{SHAPE}.ncu-rep")
    hdr = next(f for f in set(la.sass["source_file"].dropna()) if f.endswith("softmax_math.cuh"))
    text = "// @region softmax\n" + "x;\n" * 100
    assert pc_regions(la, {hdr: text})[1] == "inferred"
    kern = next(f for f in set(la.sass["source_file"].dropna()) if f.endswith("kernel.cu"))
    assert pc_regions(la, {hdr: text, kern: "__global__ void k() {}\n// @region qk\n" + "x;\n" * 400})[1] == "declared"


def test_show_json_has_regions():
    la = _launch(ROOT / f"reports/h200/ext-sdpa-flash/{SHAPE}.ncu-rep")
    s = summarize_launch(la)
    for r in s["regions"]:
        assert set(r) >= {"name", "source", "stall_samples", "samples", "share", "inst_executed"}
    assert sum(r["samples"] for r in s["regions"]) == sum(v or 0 for v in s["stall_samples"].values())
    assert np.isclose(sum(r["share"] for r in s["regions"]), 1.0)
