"""Summaries that hold for any kernel: properties over many committed reports, not golden values of one.

Subjects: the H200 reports (our ladder, cuDNN, FlashAttention-2; the zoo of production kernels once committed
under reports/h200/zoo/), the public reports from other GPUs (A100 CUTLASS int8 GEMMs and a reference GEMM,
A10G SGEMMs with no warp sampling, an RTX 4070 kernel whose second launch ncu left as NaN, H800 elementwise
kernels and a NaN flash launch) and the shared starter reports.

- no ``nan`` / ``inf`` in any format (table, json, csv, html) of ``show``, ``diff`` and ``migration``;
- a top waiter only with enough samples, ties marked;
- unrelated kernels are never compared as versions;
- phases only with enough PM samples;
- DRAM/L2 throughput as a share of the peak whenever bytes and time exist;
- a ``-G`` build is flagged.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clirun import whowaits
from conftest import ROOT

STARTER = Path("/work/shared/starter-reports")
PUBLIC = sorted((ROOT / "tests/public-reports").rglob("*.ncu-rep"))
H200 = [ROOT / "reports/h200" / p for p in (
    "v01_naive/b1_h64_s1024_d128_fp16.ncu-rep",
    "v09_wgmma/b1_h64_s1024_d128_fp16.ncu-rep",
    "v19_lazy_rescale/b1_h64_s1024_d128_fp16.ncu-rep",
    "ext-sdpa-cudnn-fullset/b1_h64_s1024_d128_fp16.ncu-rep",
    "ext-sdpa-flash/b1_h64_s1024_d128_fp16.ncu-rep",
)]
ZOO = sorted((ROOT / "reports/h200/zoo").rglob("*.ncu-rep")) if (ROOT / "reports/h200/zoo").is_dir() else []
SUBJECTS = [p for p in PUBLIC + H200 + ZOO + (sorted(STARTER.glob("*.ncu-rep")) if STARTER.is_dir() else [])
            if p.is_file()]

#: a non-finite number as any of our formats would print it: Python's and pandas' nan/inf, JSON's NaN/Infinity;
#: word-bounded and case-sensitive, so SASS immediates (`FFMA R26, R21, R18, +INF`, `QNAN`) do not count
NONFINITE = re.compile(r"(?<![A-Za-z_])(nan|-?inf|NaN|-?Infinity)(?![A-Za-z_])")


def _ids(p: Path) -> str:
    return str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p.name)


def _clean(text: str, where: str) -> None:
    hits = [m.group(0) for m in NONFINITE.finditer(text)]
    if hits:
        i = NONFINITE.search(text).start()
        raise AssertionError(f"{where}: {hits[:5]} in …{text[max(0, i - 200):i + 60]}…")


def test_there_are_many_subjects():
    assert len(SUBJECTS) >= 12
    ccs = {"A100", "A10G", "RTX 4070", "H800"}
    names = " ".join(str(p) for p in SUBJECTS)
    assert all(k in names for k in ("cutlass", "esmm", "bbastar", "sglang"))
    assert ccs  # the public reports span Ampere (8.0, 8.6), Ada (8.9) and Hopper (9.0)


@pytest.mark.slow
@pytest.mark.parametrize("path", SUBJECTS, ids=_ids)
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_show_prints_no_nan(path, fmt):
    proc = whowaits("show", path, "--format", fmt, "--top", "50")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout, f"show {path.name} --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


PAIRS = [(PUBLIC[i], PUBLIC[i + 1]) for i in range(len(PUBLIC) - 1)] + [
    (H200[0], H200[2]), (PUBLIC[0], H200[3])] + [(ZOO[i], ZOO[i + 1]) for i in range(0, len(ZOO) - 1, 2)]


@pytest.mark.slow
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0].stem}-vs-{p[1].stem}")
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_diff_prints_no_nan(pair, fmt):
    proc = whowaits("diff", *pair, "--format", fmt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout + proc.stderr, f"diff {pair[0].name} {pair[1].name} --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "json", "csv", "html"])
def test_migration_prints_no_nan(fmt, tmp_path):
    subjects = PUBLIC + H200[:3] + ZOO[:6]
    if fmt == "html":
        out = tmp_path / "m.html"
        proc = whowaits("migration", *subjects, "--html", out)
        assert proc.returncode == 0, proc.stderr[-2000:]
        body = out.read_text().split("</head>", 1)[1]  # plotly.js itself (in the head) has NaN in its code
        _clean(body, "migration --html")
        return
    proc = whowaits("migration", *subjects, "--format", fmt)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _clean(proc.stdout + proc.stderr, f"migration --format {fmt}")
    if fmt == "json":
        json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


# --- a top waiter needs enough samples; ties are marked -----------------------------------------------------

def _summaries(paths):
    from profiler.compare.cache import summaries

    return [(p, s) for p in paths for s in summaries(p)]


@pytest.mark.slow
def test_top_waiter_needs_enough_samples_and_marks_ties():
    from profiler.compare.diff import (MIN_TOP_SAMPLES, MIN_TOTAL_SAMPLES, TIE_Z, no_top_waiter, top_waiter,
                                       total_samples)

    seen_none = seen_some = 0
    for path, s in _summaries(SUBJECTS):
        top, why = top_waiter(s), no_top_waiter(s)
        assert (top is None) == (why is not None), (path, why)
        n = total_samples(s)
        if top is None:
            seen_none += 1
            assert n < MIN_TOTAL_SAMPLES or max((w["samples"] for w in s["who_waits"]), default=0) < MIN_TOP_SAMPLES \
                or why == "no stall samples", (path, n, why)
            continue
        seen_some += 1
        assert n >= MIN_TOTAL_SAMPLES and top["samples"] >= MIN_TOP_SAMPLES
        others = [w for w in s["who_waits"] if w["reason"] not in ("selected", "not_selected")
                  and (w["class"], w["reason"]) != (top["class"], top["reason"])]
        assert all(w["samples"] <= top["samples"] for w in others)
        for w in others:  # tied exactly when within the band
            tied = top["samples"] - w["samples"] <= TIE_Z * (top["samples"] + w["samples"]) ** 0.5
            assert (f"{w['class']}·{w['reason']}" in top["tied_with"]) == tied, (path, w)
    assert seen_none and seen_some  # the public reports hold launches of both kinds


def test_a_launch_with_few_samples_gets_no_top_waiter():
    """The A100 CUTLASS int8 GEMM launch of report-s4 has 101 stall samples (ncu's source page: the per-PC
    samples sum to 101); its largest waiting cell, BAR·long_scoreboard, has 16 and INT·imc_miss 15: a tie."""
    from profiler.compare.diff import top_waiter, waiter_name

    s = [x for p, x in _summaries([ROOT / "tests/public-reports/cutlass-panjd123/report-s4.ncu-rep"])][0]
    top = top_waiter(s)
    assert (top["class"], top["reason"], top["samples"]) == ("BAR", "long_scoreboard", 16)
    assert "INT·imc_miss" in top["tied_with"]
    assert "tied with" in waiter_name(top, True)
    few = {**s, "stall_samples": {"wait": 4}, "who_waits": [{**s["who_waits"][0], "samples": 4}]}
    assert top_waiter(few) is None


# --- phases need enough PM samples ---------------------------------------------------------------------------

@pytest.mark.slow
def test_phases_only_from_enough_pm_samples():
    from profiler.analyze.timeline import MIN_PM_SAMPLES, timeline
    from profiler.report import load_report

    with_phases = without = 0
    for path in SUBJECTS:
        for la in load_report(path).launches:
            tl = timeline(la)
            if tl["t_ns"] is None:
                assert tl["phases"] is None
                continue
            if len(tl["t_ns"]) < MIN_PM_SAMPLES:
                without += 1
                assert tl["phases"] is None and tl["tail_share"] is None
                assert any("PM samples" in (m.get("reason") or "") for m in tl["missing"])
            else:
                with_phases += 1
                assert tl["phases"] is not None and sum(p["share"] for p in tl["phases"]) == pytest.approx(1.0)
    assert with_phases and without


# --- unrelated kernels are not compared as versions ----------------------------------------------------------

def test_different_kernels_are_not_compared_as_versions():
    proc = whowaits("diff", ROOT / "tests/public-reports/bbastar/rtx4070-astar-full.ncu-rep",
                    ROOT / "tests/public-reports/sglang-flyinglandlord/h800-sampling-flash-full.ncu-rep",
                    "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["speedup"] is None
    assert "different kernels" in d["verdict"] and "faster" not in d["verdict"] and "slower" not in d["verdict"]
    # launches summed are said, with their names
    assert any("launches summed" in n and "distribution_elementwise_grid_stride_kernel" in n for n in d["notes"])


def test_versions_of_one_kernel_still_compare():
    s4, s8 = (ROOT / f"tests/public-reports/cutlass-panjd123/report-{x}.ncu-rep" for x in ("s4", "s8"))
    proc = whowaits("diff", s4, s8, "-k", "cutlass", "--format", "json")
    d = json.loads(proc.stdout)
    assert d["speedup"] is not None and "different kernels" not in d["verdict"]
    # the ladder and the SDPA backends at one shape are one problem, whatever their kernels are called
    proc = whowaits("diff", "v19_lazy_rescale", "ext-sdpa-cudnn", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["speedup"] is not None


def test_launches_are_matched_by_kernel_name_and_grid():
    """report-s4 and report-s8 each hold the CUTLASS GEMM and ReferenceGemm_kernel; the H800 report four
    elementwise launches: no name in common with the A100 reports, so nothing is matched and each says what
    it sums."""
    from profiler.compare import load_versions

    s4, s8 = (str(ROOT / f"tests/public-reports/cutlass-panjd123/report-{x}.ncu-rep") for x in ("s4", "s8"))
    ps = load_versions([s4, s8])
    assert [p.launches for p in ps] == [2, 2]
    assert all(any("2 launches summed" in n for n in p.meta["left_out"]) for p in ps)
    from profiler.compare.subjects import match_launches

    # a subject that has the reference GEMM only: the others keep only that kernel's launches
    ref_only = load_versions([s4], kernels=["ReferenceGemm"])[0]
    ps = load_versions([s4, s8])
    for p in ps:
        p.meta = {}
    both = ps + [ref_only]
    match_launches(both)
    assert [p.launches for p in both] == [1, 1, 1]
    assert "ReferenceGemm_kernel" in both[0].summary["kernel"]
    assert any("left out Kernel grid [3, 4, 1] ×1" in n for n in both[0].meta["left_out"])


# --- TFLOPS from the paths the chip has ----------------------------------------------------------------------

@pytest.mark.slow
def test_sass_tensor_flops_equal_the_ops_counters_where_they_count():
    """Where ncu's sm__ops_path counters count a path (fp16/bf16/tf32 HMMA and HGMMA on the H200), the SASS's
    count (executions x tile) equals them within 0.1%: the same FLOPs two ways. Over every H200 report."""
    from profiler import metrics as M
    from profiler.analyze.roofline import sass_tensor_flops
    from profiler.report import load_report

    checked = 0
    for path in sorted((ROOT / "reports/h200").rglob("*.ncu-rep")):
        for la in load_report(path).launches:
            sass = sass_tensor_flops(la)
            for p, (counters, _) in M.tensor_op_counters().items():
                vals = [la.value(c) for c in counters]
                if any(v is None for v in vals) or not sum(vals) or sass[p] is None:
                    continue
                assert sass[p] == pytest.approx(sum(vals), rel=1e-3), (path, p)
                checked += 1
    assert checked >= 20


def test_fp8_gemm_is_measured_against_the_fp8_roof():
    """cuBLAS fp8 8192³ (zoo): gh100 has no fp8 ops counter, so its FLOPs come from the SASS (QGMMA.64x144x32,
    1.10e12 for 2 x 8192³ = 1.0995e12) and its roof is twice the fp16 wgmma roof; the tensor pipe (93.8%
    busy) and the roof share agree within a few points."""
    paths = sorted((ROOT / "reports/h200/zoo/cublas-gemm-fp8").glob("*.ncu-rep"))
    if not paths:
        pytest.skip("no zoo fp8 report")
    s = [x for p, x in _summaries(paths)][0]
    assert s["roofline"]["flops_by_path"]["tensor_hgmma"] == pytest.approx(2 * 8192 ** 3, rel=0.01)
    c = s["roofline"]["ceilings"]
    assert c["tensor_hgmma_tflops"] == pytest.approx(2 * 4096 * 132 * c["clock_hz"]["sm"] / 1e12, rel=0.01)
    assert abs(s["tensor_roof_pct"] - s["tensor_pipe_pct"]) < 5


# --- a -G debug build is flagged -------------------------------------------------------------------------------

DEBUG_SRC = """
__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float acc = 0.f;
  for (int k = 0; k < 4; ++k) acc += a * x[(i + k) % n];
  if (i < n) y[i] = acc + y[i];
}
"""


def _sass_of(cubin: Path) -> list[str]:
    from kernels.sass import instructions, sass_text

    return [text for _, text in instructions(sass_text(cubin))]


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80", "sm_75"])
def test_a_debug_build_is_flagged_from_its_sass(tmp_path, arch):
    """The same kernel compiled here with and without -G: the -G cubin's SASS is full of `MOV Rn, Rn` (58 of
    192 instructions for sm_90a with nvcc 13.0), the optimised one has none."""
    import subprocess

    from conftest import have_nvcc
    from kernels.build import find_nvcc
    from profiler.analyze.summary import build_signs

    if not have_nvcc():
        pytest.skip("no nvcc")
    src = tmp_path / "k.cu"
    src.write_text(DEBUG_SRC)
    got = {}
    for flag in ("-G", "-lineinfo"):
        out = tmp_path / f"k{flag}.cubin"
        subprocess.run([find_nvcc(), "-cubin", f"-arch={arch}", flag, "-o", str(out), str(src)], check=True,
                       capture_output=True)
        got[flag] = build_signs(_sass_of(out))
    assert got["-G"]["debug"] is True and got["-G"]["self_moves"] >= 10
    assert got["-lineinfo"]["debug"] is False and got["-lineinfo"]["self_moves"] == 0


@pytest.mark.slow
def test_no_committed_report_is_a_debug_build():
    """Every committed report is of an optimised build: none is flagged (no false alarm on cuBLAS, CUTLASS,
    Triton, cuDNN, FA2, our ladder or the public reports)."""
    flagged = [(p, s["build"]) for p, s in _summaries(SUBJECTS + sorted((ROOT / "reports/h200").rglob("v*/*.ncu-rep")))
               if (s.get("build") or {}).get("debug")]
    assert flagged == []


# --- DRAM / L2 throughput as a share of the peak -------------------------------------------------------------

@pytest.mark.slow
def test_throughput_whenever_bytes_and_time_exist():
    checked = 0
    for path, s in _summaries(SUBJECTS):
        tp, rl = s["throughput"], s["roofline"]
        for lv in ("dram", "l2"):
            b, bw = rl["bytes"][lv], rl["ceilings"]["bandwidth_bytes_per_s"][lv] if rl["ceilings"] else None
            if b is not None and s["duration_ns"]:
                assert tp[f"{lv}_bytes_per_s"] == pytest.approx(b / (s["duration_ns"] * 1e-9))
                if bw:
                    checked += 1
                    assert tp[f"{lv}_pct_of_peak"] == pytest.approx(100 * tp[f"{lv}_bytes_per_s"] / bw)
                    assert 0 <= tp[f"{lv}_pct_of_peak"] <= 100, (path, lv)
            else:
                assert tp[f"{lv}_bytes_per_s"] is None and tp[f"{lv}_pct_of_peak"] is None
    assert checked >= 10


def test_older_chips_are_not_partial_for_hopper_only_fields():
    """On the A100, A10G and RTX 4070 reports no gap names a field only Hopper has (wgmma counters, the
    warpgroup_arrive reason, clusters, stmatrix bytes): those are absent by design, not for want of a section."""
    from profiler.compare.gaps import gaps

    hopper_only = re.compile(r"gmma|warpgroup_arrive|cluster|stsm")
    checked = 0
    for path, s in _summaries(PUBLIC):
        if float(s["device"]["cc"]) >= 9.0:
            continue
        checked += 1
        assert not [f for f in gaps(s).fields if hopper_only.search(f["field"])], path
    assert checked >= 5


def test_tensor_paths_the_chip_lacks_carry_nothing():
    """Before CC 9.0 there is no wgmma: its path carries 0 FLOPs, not an unknown; a launch whose SASS (with
    executed counts) has no MMA carries 0 tensor FLOPs on every path (the RTX 4070 search kernel)."""
    for path, s in _summaries(PUBLIC):
        if float(s["device"]["cc"]) < 9.0:
            assert s["roofline"]["flops_by_path"]["tensor_hgmma"] == 0.0, path
    s = [x for p, x in _summaries([ROOT / "tests/public-reports/bbastar/rtx4070-astar-full.ncu-rep"])][0]
    assert s["roofline"]["flops_by_path"]["tensor_hmma"] == 0.0
