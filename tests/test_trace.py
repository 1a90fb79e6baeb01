"""The measured role trace (docs/trace.md): the compile-time switch and the committed traces.

* ``-DWHOWAITS_TRACE`` off, the cubin's SASS is identical to a build whose headers carry no trace code at
  all (the same headers and kernels with every ``WHOWAITS_TRACE_*(...)`` line and the trace.cuh include
  removed), for every ws rung (STATIC_WS: v10-v19, landed or in kernels/wip/); on, it differs (clock64
  reads). Compiled here, no GPU (nvcc 13.0 in the dev extra).
* On, the stamps inside every wgmma commit -> wait window of every ws rung are parked ones (clock read +
  shared store, no load, no global store): scripts/trace_windows.py reads it from the SASS.
* The committed traces (reports/h200/traces/<version>/, measured on the H200 with ``whowaits trace``) are
  re-analysed from their raw events and agree with the static graph's heaviest edge of the same version.
  Format 1 (e303d95, v10-v12) and format 2 (reports/h200/traces-format2/<version>/: c1c9c6e, v10-v16;
  dbc67b3, v17-v19) each have their tests: a pass where the data agrees, a strict xfail with the measured
  reason where it does not.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import lru_cache

import pytest

from conftest import ROOT

from kernels import registry

VERSIONS = ["v10_warp_specialized", "v11_pingpong", "v12_intra_wg_overlap"]  # the committed traces
WS_VERSIONS = [*VERSIONS, "v13_persistent", "v14_cross_tile_qk"]  # the ws rungs of the first format-2 run
# the static proofs (off-switch identity, parked windows) hold every ws rung, landed (kernels/v*/) or prepared
# (kernels/wip/v*/, so that one lands ready to be traced): read from the registry (family "ws"), so a new rung
# is covered without editing a list; v10-v19 since v15-v19 landed (kernels/wip/ has no rung). Each costs a
# traced build and a build from the trace-free headers (two nvcc runs; its own build is the compile proofs')
STATIC_WS = [v.id for v in (*registry.versions(), *registry.wip_versions()) if v.family == "ws"]
# v26's traced builds spill in the producer warpgroup (24 registers after setmaxnreg): a cluster kernel's shared
# addresses carry the CTA's window (S2UR SR_CgaCtaId + ULEA), and beside the multicast slice's coordinates the
# trace's cursors no longer fit (nvcc 13.0, d128: 52-60 B stored in the event trace, 4 B in the wait log; d64 44-68 B);
# its own build has no spill (tests/test_kernels_sm90.py::test_v26_static_sass)
TRACED_SPILLS = {"v26_kv_multicast": "v26's producer spills in the traced builds (cluster addresses + trace cursors)",
                 "v38_kv_multicast4": "v38's producer spills in the traced builds (cluster addresses + trace cursors)",
                 "v39_kv_multicast8": "v39's producer spills in the traced builds (cluster addresses + trace cursors)"}
TRACES = ROOT / "reports/h200/traces"
SHAPE = "b1_h64_s1024_d128_fp16"


def _nvcc():
    from kernels import build as B
    from profiler.errors import WhowaitsError

    try:
        return B.find_nvcc()
    except WhowaitsError as err:
        pytest.skip(str(err))


def _compile(tmp, name: str, unit: str, include) -> str:
    from kernels import build as B
    from kernels import sass as S

    tu = tmp / f"{name}.cu"
    tu.write_text(unit)
    cubin = tmp / f"{name}.cubin"
    proc = subprocess.run([_nvcc(), *B.NVCC_FLAGS, "-I", str(include), "-o", str(cubin), str(tu)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return S.sass_text(cubin)


@pytest.fixture(scope="module")
def untraced_headers(tmp_path_factory):
    """A copy of kernels/ whose sm90 headers have no trace code at all."""
    from kernels.build import KERNELS_DIR

    root = tmp_path_factory.mktemp("plain") / "kernels"
    shutil.copytree(KERNELS_DIR, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "common/sm90/trace.cuh").unlink()
    for h in [*(root / "common/sm90").glob("*.cuh"), *root.glob("v*/kernel.cu"), *root.glob("wip/v*/kernel.cu")]:
        text = h.read_text()
        kept = [ln for ln in text.splitlines(keepends=True)
                if not re.search(r"WHOWAITS_TRACE_[A-Z_]+\(", ln) and '#include "common/sm90/trace.cuh"' not in ln]
        h.write_text("".join(kept))
    assert not any("WHOWAITS_TRACE" in h.read_text()
                   for h in [*(root / "common").glob("**/*.cuh"), *root.glob("v*/kernel.cu"), *root.glob("wip/v*/kernel.cu")])
    return root


@pytest.mark.parametrize("version", STATIC_WS)
def test_switch_off_sass_identical_to_no_trace_code(version, untraced_headers, tmp_path):
    from kernels import build as B
    from kernels import registry
    from kernels import sass as S
    from kernels import tracebuild as T
    from kernels.build import translation_unit

    ver = registry.get_landed_or_wip(version)
    cfg = ver.config_for(128, "fp16", False)
    unit = translation_unit(ver, cfg)
    # switch off: the rung's own build (kernels.build: this translation unit, NVCC_FLAGS, -I kernels), which
    # the ladder's compile proofs build anyway; from the shared build cache when they ran first, so it is
    # compiled once in the session instead of once more here (~1 s of nvcc per rung on the 2-core machine)
    _nvcc()  # skips where there is no nvcc (never in CI), as _compile does
    built = B.build(ver, cfg)
    assert translation_unit(ver, built.config) == unit
    off = S.sass_text(built.cubin)
    plain = _compile(tmp_path, "plain", unit, untraced_headers)
    assert off == plain
    # switch on: kernels.tracebuild's traced build (this unit with WHOWAITS_TRACE 1 first), the one the trace runs
    # and test_stamps_inside_wgmma_windows_are_parked reads, from its cache when that test ran first
    assert T.traced_unit(ver, cfg) == "#define WHOWAITS_TRACE 1\n" + unit
    on = S.sass_text(T.build_traced(ver, cfg).cubin)
    assert on != off
    assert "SR_CLOCKLO" in on and "SR_CLOCKLO" not in off
    assert "SR_GLOBALTIMER" in on


# The bound the parked stamps hold (trace.cuh, format 2): inside every window from an HGMMA group's last
# ``HGMMA ... gsb0`` to the ``WARPGROUP.DEPBAR.LE`` that retires it, the traced build holds no load and no
# global store and at most one shared store per clock read (test_stamps_inside_wgmma_windows_are_parked), and at
# most MAX_EXTRA_PER_CLOCK non-floating-point instructions more than the untraced build per clock read it adds
# (a parked stamp is 6: CS2R, ISETP, VIADD, two IMAD.MOV for kind/arg, a predicated STS.128;
# test_stamps_inside_wgmma_windows_are_short). Floating-point, predicate-logic and uniform-datapath instructions
# are not counted: they are the kernel's own (the softmax and its masks, the next group's descriptor
# arithmetic), which the traced schedule moves into a window (v12-v14's and v17-v19's PV window holds the softmax
# in the traced build, not in the untraced one, where ptxas hoists the PV wait). The count is by opcode, so the
# kernel's own integer work that moves in with the softmax counts as the trace's: v19's lazy rescale (COUNT_MISSES).
# The previous header (ordinary stamps, fb0fdcc) fails both: 2-6 LDS and STG in every window.
MAX_EXTRA_PER_CLOCK = 8


def _trace_windows():
    import importlib.util

    spec = importlib.util.spec_from_file_location("trace_windows", ROOT / "scripts/trace_windows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@lru_cache(maxsize=None)
def _windows_of(version):
    return _trace_windows().analyse(version)


#: v46 waits on an mbarrier inside its PV window by design (the try-wait that keeps ptxas from hoisting the PV
#: wait): that wait's stamps are ordinary ones (a load and stores), so its windows hold unparked stamps
IN_WINDOW_WAIT = {"v46_pv_wait_late": "v46's own mbarrier wait sits inside the PV window (its design): the wait's "
                                      "begin/end stamps are ordinary (LDS, STG) and the window grows by them"}


@pytest.mark.parametrize("version", [
    pytest.param(v, marks=pytest.mark.xfail(strict=True, reason={**TRACED_SPILLS, **IN_WINDOW_WAIT}[v]))
    if v in TRACED_SPILLS or v in IN_WINDOW_WAIT else v
    for v in STATIC_WS])
def test_stamps_inside_wgmma_windows_are_parked(version):
    _nvcc()
    r = _windows_of(version)
    assert r["spill_stores_traced"] == 0 and r["spill_loads_traced"] == 0
    assert r["windows"], "every ws rung commits wgmma groups"
    for w in r["windows"]:
        where = f"{version} HGMMA {w['commit']} -> DEPBAR.LE {w['wait_n']} {w['wait']}"
        assert set(w["memory_ops"]) <= {"STS"}, (where, w["memory_ops"])  # no LDS, LDG, STG, atomics
        assert w["clock_reads"] >= 1, where
        assert w["memory_ops"].get("STS", 0) <= w["clock_reads"], (where, w["memory_ops"], w["clock_reads"])


COUNT_MISSES = {
    "v19_lazy_rescale": (
        "v19: its two PV windows (HGMMA -> DEPBAR.LE 0 of the loops, the softmax inside in the traced build: 484/440 "
        "vs 148/137 untraced instructions) count 51 and 55 trace instructions for 6 clock reads (bound 48); v18's "
        "same windows, the same kernel without the lazy rescale, count 39 and 42. The 12-13 more are the lazy "
        "rescale's own decision, moved into the window with the softmax and counted by opcode (the first: VOTE.ANY, "
        "SEL x5, LOP3 x2, ISETP x2, predicated IMAD.MOV; the second: VOTE.ANY, P2R x2, ISETP x2, CS2R SRZ, 8 IMAD "
        "such as the -inf resets), not stamps: the "
        "windows hold 6 STS.128 for 6 clock reads and no LDS/LDG/STG (test_stamps_inside_wgmma_windows_are_parked "
        "passes; scripts/trace_windows.py v19_lazy_rescale --list)"),
}


@pytest.mark.parametrize("version", [
    pytest.param(v, marks=pytest.mark.xfail(strict=True, reason={**COUNT_MISSES, **IN_WINDOW_WAIT}[v]))
    if v in COUNT_MISSES or v in IN_WINDOW_WAIT else v
    for v in STATIC_WS])
def test_stamps_inside_wgmma_windows_are_short(version):
    _nvcc()
    for w in _windows_of(version)["windows"]:
        where = f"{version} HGMMA {w['commit']} -> DEPBAR.LE {w['wait_n']} {w['wait']}"
        clocks = w["clock_reads"]
        assert w["trace_ops"] <= MAX_EXTRA_PER_CLOCK * max(clocks, 1), (where, clocks, w["extra_ops"])


def test_static_proofs_cover_every_ws_rung():
    """The registry's ws family is v10-v19 (all landed: kernels/wip/ holds no rung), and STATIC_WS is it."""
    assert STATIC_WS[:10] == ["v10_warp_specialized", "v11_pingpong", "v12_intra_wg_overlap", "v13_persistent",
                              "v14_cross_tile_qk", "v15_softmax_under_pv", "v16_desc_iterator", "v17_tma_store_o",
                              "v18_desc_iterator_o", "v19_lazy_rescale"]
    assert set(FMT2_VERSIONS) <= set(STATIC_WS)


def test_window_scanner_retires_groups_in_order():
    """windows(): DEPBAR.LE N retires all but the N most recent groups (hand-written SASS lines)."""
    tw = _trace_windows()
    seq = [(0x10, "HGMMA.64x128x16.F32 R24, gdesc[UR4], R24, gsb0"), (0x20, "CS2R R16, SR_CLOCKLO"),
           (0x30, "HGMMA.64x128x16.F32 R88, R164, gdesc[UR8].tnspB, R88, gsb0"), (0x40, "STS.128 [R9+UR10], R16"),
           (0x50, "WARPGROUP.DEPBAR.LE gsb0, 0x1"), (0x60, "LDS.128 R4, [R2]"), (0x70, "WARPGROUP.DEPBAR.LE gsb0, 0x0")]
    w = tw.windows(seq)
    assert [(x["commit"], x["wait"], x["wait_n"]) for x in w] == [(0x10, 0x50, 1), (0x30, 0x70, 0)]
    assert dict(w[0]["ops"]) == {"CS2R": 1, "HGMMA": 1, "STS": 1}
    assert dict(w[1]["ops"]) == {"STS": 1, "WARPGROUP": 1, "LDS": 1}


# --- the committed traces -------------------------------------------------------------------------


def _summary(version):
    path = TRACES / version / f"{SHAPE}.trace-summary.json"
    if not path.exists():
        pytest.skip(f"{path} not committed")
    return json.loads(path.read_text())


NOT_MET = pytest.mark.xfail(strict=True, reason=(
    "the trace disagrees with the static graph on the committed traces (light stamp, e303d95): a stamp still costs "
    "97-144 cycles on the H200 (the launch's shortest wait), traced +11/+27/+33%, and the 1-3 stamps a "
    "consumer takes between a wgmma commit and its wait give the tensor core that time: the measured wgmma "
    "waits shrink to 5.0/1.7/1.4% of warp-cycles, so the heaviest traced edge is the consumers' Q wait at "
    "each CTA's start (7.6/7.7/7.4%), the static graph's second edge; see test_wgmma_untraced_estimate"))

@pytest.mark.parametrize("version", [pytest.param(v, marks=NOT_MET) for v in VERSIONS])
def test_trace_heaviest_edge_agrees_with_static_graph(version):
    """The goal of the trace: the measured trace and the static graph (ncu samples of the committed
    report) name the same heaviest edge, for the same version (trace edges weighted by the warps that
    wait, as ncu's sampler weighs them)."""
    from profiler.analyze.roles import role_graph
    from profiler.analyze.event_trace import load_raw, summarize
    from profiler.cli.trace import static_labels
    from profiler.report import load_report

    _summary(version)
    arrays, meta = load_raw(TRACES / version / f"{SHAPE}.trace-raw.npz")
    labels, names, _ = static_labels(version, SHAPE)
    assert labels, "the static graph's mbarrier labels"
    s = summarize(arrays, meta, labels, names)
    g = role_graph(load_report(ROOT / f"reports/h200/{version}/{SHAPE}.ncu-rep").launches[0])
    h = g.heaviest()
    top = s["heaviest"]
    assert (top["waiter"], top["barrier"], top["releaser"]) == (h.waiter, h.barrier, h.releaser)
    # and every barrier the trace saw is one the static graph names (same labels, same releasers)
    static = {(e.waiter, e.barrier, e.releaser) for e in g.edges}
    for e in s["edges"]:
        assert (e["waiter"], e["barrier"], e["releaser"]) in static, e


@pytest.mark.parametrize("version", VERSIONS)
def test_committed_summary_is_what_the_raw_events_say(version):
    from profiler.analyze.event_trace import load_raw, summarize
    from profiler.cli.trace import static_labels

    committed = _summary(version)
    arrays, meta = load_raw(TRACES / version / f"{SHAPE}.trace-raw.npz")
    labels, names, _ = static_labels(version, SHAPE)
    s = summarize(arrays, meta, labels, names)
    assert [(e["waiter"], e["barrier"], e["releaser"], e["cycles"]) for e in s["edges"]] == [
        (e["waiter"], e["barrier"], e["releaser"], e["cycles"]) for e in committed["edges"]]
    top, st = committed["heaviest"], committed["static_heaviest"]
    assert committed["heaviest_agrees"] == ((top["waiter"], top["barrier"], top["releaser"])
                                           == (st["waiter"], st["barrier"], st["releaser"]))
    assert committed["wgmma_untraced"] == s["wgmma_untraced"]
    assert committed["dropped_events"] == 0 and meta.get("full_slots", 0) == 0
    o = committed["overhead"]
    assert o["traced_us"] > 0 and o["untraced_us"] > 0
    assert o["max_abs_diff_traced_vs_untraced"] == 0  # the trace does not change the result
    # the light stamp (cursor in shared memory, no global load): 97-144 cycles, was 273; overhead +11..33%,
    # was +68..116%
    assert committed["stamp_cycles"]["consumer"] < 160
    assert o["overhead_pct"] < 40
    assert meta["gpu"].startswith("NVIDIA H200")


UNDETERMINED = pytest.mark.xfail(strict=True, reason=(
    "v11/v12: the untraced estimate of the wgmma edge brackets the Q wait (lower bound below, upper above: "
    "most of their wgmma waits did not block in the trace, so only an upper bound is known for them)"))


@pytest.mark.parametrize("version", [VERSIONS[0], *(pytest.param(v, marks=UNDETERMINED) for v in VERSIONS[1:])])
def test_wgmma_untraced_estimate(version):
    """The stamps between a wgmma commit and its wait given back (profiler/analyze/event_trace.py, "wgmma group,
    untraced estimate"): even the lower bound of the consumers' wgmma-group waits, untraced, outweighs every
    other traced edge, as the static graph says. Holds for v10 (22.0M..26.8M warp-cycles vs the Q wait's
    12.1M); v11/v12 undetermined."""
    from profiler.analyze.event_trace import load_raw, summarize
    from profiler.cli.trace import static_labels

    _summary(version)
    arrays, meta = load_raw(TRACES / version / f"{SHAPE}.trace-raw.npz")
    labels, names, static_top = static_labels(version, SHAPE)
    u = summarize(arrays, meta, labels, names)["wgmma_untraced"]
    assert static_top["barrier"] == "wgmma group"
    assert u["warp_cycles_lo"] <= u["warp_cycles_hi"]
    assert u["heaviest_if_untraced"] == "agrees", u


def test_perfetto_json_shape():
    import gzip

    path = TRACES / "v11_pingpong" / f"{SHAPE}.trace.json.gz"
    if not path.exists():
        pytest.skip("no committed trace")
    with gzip.open(path, "rt") as fh:
        tr = json.load(fh)
    ev = tr["traceEvents"]
    assert {e["ph"] for e in ev} >= {"M", "X", "i"}
    waits = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in waits)
    assert any(re.match(r"wait mbarrier@0x4[0-4]0", e["name"]) for e in waits)
    assert any(e["name"] == "wait bar (runtime id)" for e in waits)


@pytest.mark.parametrize("version", VERSIONS)
def test_trace_and_static_graph_name_the_same_edges(version):
    """Measured and sampled, the same ring: every edge the trace saw (barrier by address, releaser by who
    arrived) is an edge of the static graph of the same version, and the mbarrier edges coincide."""
    from profiler.analyze.roles import role_graph
    from profiler.report import load_report

    s = _summary(version)
    g = role_graph(load_report(ROOT / f"reports/h200/{version}/{SHAPE}.ncu-rep").launches[0])
    static = {(e.waiter, e.barrier, e.releaser) for e in g.edges}
    traced = {(e["waiter"], e["barrier"], e["releaser"]) for e in s["edges"]}
    assert traced <= static
    mb = {e for e in static if e[1].startswith("mbarrier")}
    assert {e for e in traced if e[1].startswith("mbarrier")} == mb


# --- trace format 2, measured (reports/h200/traces-format2/<version>/) ----------------------------------------
# H200 runs, b1_h64_s1024_d128_fp16: at commit c1c9c6e (2026-12-01, ~23:10 UTC) v10-v14 from
# `WHOWAITS_GIT_COMMIT=c1c9c6e BUDGET=170 bash scripts/device/h200_trace.sh`, the then-wip rungs v15/v16 from the trace
# step of the kernels/h200_v15.sh call at the same commit (renamed scripts/device/h200_wip.sh since); at commit dbc67b3
# (23:31 UTC) v17-v19 from the trace step of `RUNGS="v17_tma_store_o v18_desc_iterator_o v19_lazy_rescale"
# WHOWAITS_GIT_COMMIT=dbc67b3 BUDGET=480 bash scripts/device/h200_wip.sh`, the call that took their committed reports.
# The raw events are the device's; the summaries and Perfetto files were re-analysed here (`whowaits trace
# <version> --raw <npz>`: the static graph's labels, heaviest_agrees, the park bound); the device's printed
# output is reports/h200/traces-format2/run-2026-12-01.txt. The format-1 tests above stay as they are.
FORMAT2 = ROOT / "reports/h200/traces-format2"
FMT2_VERSIONS = [*WS_VERSIONS, "v15_softmax_under_pv", "v16_desc_iterator", "v17_tma_store_o",
                 "v18_desc_iterator_o", "v19_lazy_rescale"]
FMT2_COMMIT = {**{v: "c1c9c6e" for v in FMT2_VERSIONS[:7]}, **{v: "dbc67b3" for v in FMT2_VERSIONS[7:]}}
# golden, from the committed <version>/b1_h64_s1024_d128_fp16.trace-summary.json: overhead (untraced us, traced us,
# % : the device's, same run); the heaviest traced edge (waiter, barrier, releaser, share of warp-cycles); the
# consumers' wgmma-group share; the static graph's heaviest edge (waiter, barrier, share of ncu samples, from
# reports/h200/<version>/b1_h64_s1024_d128_fp16.ncu-rep); (stamp, park, shortest parked wait) cycles; the untraced
# estimate's verdict; the fitted SM clock (GHz)
FMT2_GOLDEN = {
    "v10_warp_specialized": ((84.2, 108.6, 28.9), ("producer", "mbarrier@0x420×2", "consumer", 0.0703), 0.0629,
                             ("consumer", "wgmma group", 0.2588), (151, 151, 192), "agrees", 1.757),
    "v11_pingpong": ((74.6, 109.1, 46.2), ("consumer", "mbarrier@0x440", "TMA ← producer", 0.0622), 0.0488,
                     ("consumer", "wgmma group", 0.1653), (85, 85, 107), "agrees", 1.740),
    "v12_intra_wg_overlap": ((74.0, 112.7, 52.4), ("consumer", "mbarrier@0x440", "TMA ← producer", 0.0613), 0.0172,
                             ("consumer", "wgmma group", 0.1542), (86, 39, 39), "undetermined", 1.748),
    "v13_persistent": ((70.8, 105.4, 48.8), ("producer", "mbarrier@0x430×2", "consumer", 0.0620), 0.0141,
                       ("consumer", "wgmma group", 0.1269), (84, 29, 29), "disagrees", 1.722),
    "v14_cross_tile_qk": ((67.8, 104.4, 53.9), ("producer", "mbarrier@0x430×2", "consumer", 0.0721), 0.0142,
                          ("consumer", "wgmma group", 0.1501), (80, 26, 26), "disagrees", 1.681),
    "v15_softmax_under_pv": ((69.7, 104.7, 50.2), ("producer", "mbarrier@0x430×2", "consumer", 0.0725), 0.0127,
                             ("producer", "mbarrier@0x430×2", 0.0473), (79, 26, 26), "disagrees", 1.683),
    "v16_desc_iterator": ((68.5, 104.4, 52.5), ("producer", "mbarrier@0x430×2", "consumer", 0.0726), 0.0144,
                          ("consumer", "wgmma group", 0.0688), (81, 26, 26), "disagrees", 1.681),
    # dbc67b3 (the device's lines: untraced/traced us and %, /tmp/r19/trace-<version>.txt, in the run log)
    "v17_tma_store_o": ((62.4, 106.0, 70.0), ("producer", "mbarrier@0x430×2", "consumer", 0.0739), 0.0087,
                        ("consumer", "wgmma group", 0.1719), (76, 29, 29), "disagrees", 1.688),
    "v18_desc_iterator_o": ((62.3, 104.9, 68.5), ("producer", "mbarrier@0x430×2", "consumer", 0.0732), 0.0103,
                            ("consumer", "wgmma group", 0.2212), (80, 29, 29), "disagrees", 1.695),
    "v19_lazy_rescale": ((62.9, 103.8, 65.1), ("producer", "mbarrier@0x430×2", "consumer", 0.0739), 0.0095,
                         ("consumer", "wgmma group", 0.2424), (78, 31, 31), "disagrees", 1.696),
}
CTA_BARRIER = ("common", "bar 0", "CTA (all warps)")  # the static graph's __syncthreads edge: no stamp covers it
# an HGMMA's warpgroup_arrive samples (waiting for the previous wgmma to free its operands): the trace
# stamps no such wait, the static graph has it as an edge of its own
OPERAND_WAIT = ("consumer", "wgmma operands", "tensor core (wgmma)")


def _fmt2_summary(version):
    path = FORMAT2 / version / f"{SHAPE}.trace-summary.json"
    if not path.exists():
        pytest.skip(f"{path} not committed")
    return json.loads(path.read_text())


def _fmt2_report(version):
    path = ROOT / f"reports/h200/{version}/{SHAPE}.ncu-rep"
    if not path.exists():  # committed beside the ladder's reports (reports/h200/<version>/, v15-v19 with their rungs)
        pytest.skip(f"{path} not committed")
    return path


@lru_cache(maxsize=None)
def _fmt2_resummarized(version):
    """The committed raw events analysed again, with the static labels of the committed report."""
    from profiler.analyze.event_trace import load_raw, summarize
    from profiler.cli.trace import static_labels

    arrays, meta = load_raw(FORMAT2 / version / f"{SHAPE}.trace-raw.npz")
    labels, names, top = static_labels(version, SHAPE, ROOT / "reports/h200")
    assert labels, "the static graph's mbarrier labels"
    return summarize(arrays, meta, labels, names), meta, top


@lru_cache(maxsize=None)
def _fmt2_static_graph(version):
    from profiler.analyze.roles import role_graph
    from profiler.report import load_report

    return role_graph(load_report(_fmt2_report(version)).launches[0])


@pytest.mark.parametrize("version", FMT2_VERSIONS)
def test_format2_committed_summary_is_what_the_raw_events_say(version):
    committed = _fmt2_summary(version)
    _fmt2_report(version)
    s, meta, top = _fmt2_resummarized(version)
    key = ("waiter", "barrier", "releaser", "cycles", "warp_cycles", "waits")
    assert [tuple(e[k] for k in key) for e in s["edges"]] == [tuple(e[k] for k in key) for e in committed["edges"]]
    assert committed["wgmma_untraced"] == s["wgmma_untraced"]
    st = committed["static_heaviest"]
    assert (st["waiter"], st["barrier"], st["releaser"]) == (top["waiter"], top["barrier"], top["releaser"])
    h = committed["heaviest"]
    assert committed["heaviest_agrees"] == ((h["waiter"], h["barrier"], h["releaser"])
                                           == (st["waiter"], st["barrier"], st["releaser"]))
    # the run: format 2, nothing lost, the traced output bit-identical, the commit and GPU it ran at
    assert committed["trace_format"] == 2 and committed["parked_events"] > 0
    assert committed["dropped_events"] == 0 and meta["full_slots"] == 0 and meta["parked_dropped_events"] == 0
    assert meta["max_abs_diff_traced_vs_untraced"] == 0
    assert meta["git_commit"].startswith(FMT2_COMMIT[version]) and meta["gpu"].startswith("NVIDIA H200")
    assert committed["clock_from"] == "fitted on 132 SMs (globaltimer vs clock64)"
    # golden
    (un, tr, pct), (w, b, r, share), wg_share, (sw, sb, sshare), (stamp, park, shortest), verdict, ghz = \
        FMT2_GOLDEN[version]
    o = committed["overhead"]
    assert (round(o["untraced_us"], 1), round(o["traced_us"], 1), round(o["overhead_pct"], 1)) == (un, tr, pct)
    assert (h["waiter"], h["barrier"], h["releaser"], round(h["share"], 4)) == (w, b, r, share)
    assert round(next(e["share"] for e in committed["edges"] if e["barrier"] == "wgmma group"), 4) == wg_share
    assert (st["waiter"], st["barrier"], round(st["share"], 4)) == (sw, sb, sshare)
    assert (committed["stamp_cycles"]["consumer"], committed["park_cycles"],
            committed["park_shortest_wait_cycles"]) == (stamp, park, shortest)
    assert committed["park_bounded_by_stamp"] == (park < shortest)
    assert committed["wgmma_untraced"]["heaviest_if_untraced"] == verdict
    assert round(committed["clock_ghz"], 3) == ghz


# v17-v19's TMA-store epilogue (kernels/common/sm90/tma_store.cuh, store_o in their kernel.cu) adds two waits:
# the store issuer's cp.async.bulk.wait_group(.read) before it reuses its sO buffer, which the static graph names
# consumer -[SB0]-> TMA (store) and no stamp covers (tma_store.cuh has no WHOWAITS_TRACE_*), and named barriers
# 3 + c around the store, each synced by one consumer warpgroup's own 128 threads (BAR.SYNC R, 0x80) with no
# bar.arrive anywhere: the trace, which stamps each warpgroup's leader only, sees no releaser ("unresolved"),
# and the static graph, which cannot read a register id, tells them from the pingpong's by their thread count
# (BAR.SYNC R, 0x80, a count no BAR.ARV R of the kernel has, against the pingpong's 0x100):
# bar (runtime id, 128 threads) -> consumer (its other warps): test_format2_store_barriers_are_one_warpgroups
TMA_STORE_RUNGS = ("v17_tma_store_o", "v18_desc_iterator_o", "v19_lazy_rescale")
TMA_STORE_WAIT = ("consumer", "SB0", "TMA (store)")
STORE_BARRIER = ("consumer", "bar (runtime id)", "unresolved")
STATIC_STORE_BARRIER = ("consumer", "bar (runtime id, 128 threads)", "consumer (its other warps)")


@pytest.mark.parametrize("version", FMT2_VERSIONS)
def test_format2_trace_sees_the_designed_ring(version):
    """The designed ring, measured: every edge the trace saw is an edge of the static graph of the same version and
    the trace sees every static edge but the CTA barrier; the producer waits only on the consumers (empty
    barriers), the consumers on TMA <- producer (full barriers), on the tensor core (wgmma groups) and, from v11
    on, on the other consumer warpgroup (the pingpong's named barriers). v17-v19 (TMA-store epilogue): the store
    wait is unstamped and the store barriers are one warpgroup's own (TMA_STORE_RUNGS above), nothing else."""
    s = _fmt2_summary(version)
    g = _fmt2_static_graph(version)
    static = {(e.waiter, e.barrier, e.releaser) for e in g.edges}
    traced = {(e["waiter"], e["barrier"], e["releaser"]) for e in s["edges"]}
    store = version in TMA_STORE_RUNGS
    assert (TMA_STORE_WAIT in static) == store == (STATIC_STORE_BARRIER in static)
    assert traced - static == ({STORE_BARRIER} if store else set())
    assert static - traced <= {CTA_BARRIER, TMA_STORE_WAIT, STATIC_STORE_BARRIER, OPERAND_WAIT}
    for waiter, barrier, releaser in traced - {STORE_BARRIER}:
        if waiter == "producer":
            assert barrier.startswith("mbarrier@") and releaser == "consumer"
        elif barrier.startswith("mbarrier@"):
            assert (waiter, releaser) == ("consumer", "TMA ← producer")
        elif barrier == "wgmma group":
            assert (waiter, releaser) == ("consumer", "tensor core (wgmma)")
        else:
            assert (waiter, barrier, releaser) == ("consumer", "bar (runtime id)", "consumer (other warpgroup)")
    pingpong = ("consumer", "bar (runtime id)", "consumer (other warpgroup)")
    assert (pingpong in traced) == (version != "v10_warp_specialized")


@pytest.mark.parametrize("version", TMA_STORE_RUNGS)
def test_format2_store_barriers_are_one_warpgroups(version):
    """The trace's "unresolved" named-barrier edge of v17-v19 is the store barriers alone: ids 3 and 4, each
    waited on by one consumer warpgroup (3 by warpgroup 1, 4 by warpgroup 2; 1024 waits each: 512 tiles, two
    barriers per store), and no warpgroup bar.arrives on them (the pingpong's ids 1/2: 4228 waits, each released
    by the other consumer's arrives). In the report's SASS they are BAR.SYNC R, 0x80 (one warpgroup's 128
    threads) against the pingpong's BAR.SYNC R, 0x100 and BAR.ARV R, 0x100 (both consumers), all on register
    ids; the static graph tells them apart by the count (no BAR.ARV R has 0x80): the store barriers' edge
    bar (runtime id, 128 threads) -> consumer (its other warps) holds v17 13 samples, v18 15, v19 10, the
    pingpong's bar (runtime id) -> consumer (other warpgroup) 4, 12, 5 (until 2026-12-02 one edge held both:
    17, 27, 15). Counted from the raw events and reports/h200/<version>/b1_h64_s1024_d128_fp16.ncu-rep."""
    from collections import Counter

    from profiler.analyze.event_trace import _slots, load_raw
    from profiler.report import load_report

    _fmt2_summary(version)
    arrays, meta = load_raw(FORMAT2 / version / f"{SHAPE}.trace-raw.npz")
    waits, arrives = Counter(), Counter()
    for sl in _slots(arrays, meta):
        waits.update((w.key, sl.wg) for w in sl.waits if w.kind == "named_barrier")
        arrives.update((a, sl.wg) for _, k, a in sl.events if k == 8)
    assert dict(waits) == {(1, 1): 4228, (2, 2): 4228, (3, 1): 1024, (4, 2): 1024}
    assert dict(arrives) == {(1, 2): 4228, (2, 1): 4228}
    s, _, _ = _fmt2_resummarized(version)
    e = next(x for x in s["edges"] if (x["waiter"], x["barrier"], x["releaser"]) == STORE_BARRIER)
    assert e["waits"] == 2048
    g = _fmt2_static_graph(version)
    sass = load_report(_fmt2_report(version)).launches[0].sass
    by_off = dict(zip(sass["offset"].tolist(), zip(sass["sass"].tolist(), sass["samples"].fillna(0).tolist())))
    by_count = Counter()
    for label in ("bar (runtime id)", "bar (runtime id, 128 threads)"):
        (site,) = [x for x in g.sites if x.kind == "named_barrier" and x.barrier == label]
        for pc in site.pcs:
            text, n = by_off[pc]
            count = "0x80" if "128" in label else "0x100"
            assert re.match(rf"BAR\.SYNC\S* R\d+, {count}$", text), (label, text)
            by_count[count] += int(n)
    arv = {t.rsplit(", ", 1)[1] for t in sass["sass"].tolist() if re.search(r"BAR\.ARV R\d+,", t)}
    assert arv == {"0x100"}
    edges = {x.barrier: x for x in g.edges if x.waiter == "consumer" and x.barrier.startswith("bar (runtime id")}
    assert edges["bar (runtime id)"].releaser == "consumer (other warpgroup)"
    assert edges["bar (runtime id, 128 threads)"].releaser == "consumer (its other warps)"
    expect = {"v17_tma_store_o": (13, 4), "v18_desc_iterator_o": (15, 12), "v19_lazy_rescale": (10, 5)}[version]
    assert (by_count["0x80"], by_count["0x100"]) == expect
    # plus the barrier samples ncu puts on the instruction after each BAR.SYNC (the edge's partial PCs)
    after = {k: sum(n for _, r, n in edges[k].partial if r == "barrier") for k in edges}
    assert (edges["bar (runtime id, 128 threads)"].samples - after["bar (runtime id, 128 threads)"],
            edges["bar (runtime id)"].samples - after["bar (runtime id)"]) == expect


FMT2_DISAGREES = {
    "v10_warp_specialized": (
        "v10: heaviest traced edge producer -[mbarrier@0x420x2, empty]-> consumer 7.0% of warp-cycles, the wgmma "
        "group 6.3% (11.96M vs 13.35M warp-cycles), static wgmma group 25.9% of samples; every wgmma wait follows "
        "its commit by one parked stamp and no kernel instruction (scripts/trace_windows.py), so none finds its "
        "group done (the shortest takes 192 cycles, the ordinary stamp 151) and the park's cost, bounded by the "
        "stamp, is not measured; the raw intervals put the wgmma group first (21.85M) and it is the heaviest for "
        "any park cost under 129.8 cycles (v12-v19 measure 26-39): test_format2_verdict_hangs_on_the_unmeasured_park"),
    "v11_pingpong": (
        "v11: heaviest traced edge the Q wait (mbarrier@0x440) 6.2%, the wgmma group 4.9% (9.21M vs 11.75M "
        "warp-cycles), static wgmma group 16.5%; no wgmma wait of v11 finds its group done either (the shortest "
        "takes 107 cycles, the ordinary stamp 85: the park bounded by the stamp), but the wgmma group would be the "
        "heaviest only for a park under 16.3 cycles, below every measured one (26-39): the parked stamps between "
        "commit and wait give the tensor core their time (untraced estimate: agrees, 12.3M..18.4M)"),
    "v12_intra_wg_overlap": (
        "v12: heaviest traced edge the Q wait (mbarrier@0x440) 6.1%, wgmma group 1.7%, static wgmma group 15.4%: "
        "the traced build keeps the softmax in the PV window (459 traced vs 145 untraced instructions, "
        "trace_windows), so the traced PV wait does not block; untraced estimate undetermined (2.9M..15.4M vs 12.0M)"),
    "v13_persistent": (
        "v13: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 6.2%, wgmma group 1.4%, static "
        "wgmma group 12.7%: the traced PV window holds the softmax (463 vs 141 instructions), the traced wgmma "
        "waits do not block, and the producer waits on consumers the stamps slowed (+48.8%)"),
    "v14_cross_tile_qk": (
        "v14: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 7.2%, wgmma group 1.4%, static "
        "wgmma group 15.0%: the traced PV windows hold the softmax (458/414 vs 148/135 instructions), the traced "
        "wgmma waits do not block, and the producer waits on consumers the stamps slowed (+53.9%)"),
    "v16_desc_iterator": (
        "v16: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 7.3%, static wgmma group 6.9% "
        "(425 of its 459 samples at the loop's wait_group 1, the QK^T waits, whose windows hold 32/28 untraced "
        "instructions, 47/51 traced: 4 parked stamps each); traced, those waits take 60 cycles on average (a park "
        "is 26) and the wgmma group is 1.4%: test_format2_v16_qk_waits_do_not_block_once_traced"),
    "v17_tma_store_o": (
        "v17: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 7.4%, wgmma group 0.9% (1.70M vs "
        "14.47M warp-cycles; 3.60M uncalibrated, so no park cost would change it), static wgmma group 17.2%: v14's "
        "schedule, the traced PV windows holding the softmax (458/415 vs 148/141 untraced instructions, "
        "trace_windows; 656 of the edge's 1074 samples), and no traced QK^T wait blocks (mean 34.3 cycles, a park "
        "29; 391 samples untraced): test_format2_tma_store_rungs_wgmma_waits_do_not_block_once_traced"),
    "v18_desc_iterator_o": (
        "v18: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 7.3%, wgmma group 1.0% (1.98M "
        "vs 14.11M), static wgmma group 22.1%: both reasons at once, v14's traced PV windows with the softmax "
        "(458/415 vs 148/141; 650 of 1349 samples) and v16's short QK^T windows (26/28 untraced instructions, "
        "47/51 traced; 663 samples) whose four parked stamps let the group finish (traced mean 33.9 cycles, park 29)"),
    "v19_lazy_rescale": (
        "v19: heaviest traced edge producer -[mbarrier@0x430x2, empty]-> consumer 7.4%, wgmma group 1.0% (1.81M "
        "vs 14.11M), static wgmma group 24.2%: as v18, the traced PV windows hold the softmax (484/440 vs 148/137; "
        "704 of 1507 samples) and the short QK^T windows (26/28 untraced, 47/51 traced; 770 samples) do not block "
        "traced (mean 59.6 cycles, park 31, none over 200 calibrated)"),
}


@pytest.mark.parametrize("version", [
    pytest.param(v, marks=pytest.mark.xfail(strict=True, reason=FMT2_DISAGREES[v])) if v in FMT2_DISAGREES else v
    for v in FMT2_VERSIONS])
def test_format2_heaviest_edge_agrees_with_static_graph(version):
    """The trace's goal on the format-2 traces: the trace's heaviest edge (warp-weighted, less the stamp
    calibration) is the static graph's (ncu samples of the committed report of the same version). Holds for v15
    only (producer <- empty ring on both sides), the rung whose traced and untraced PV windows both hold the
    softmax; the others (v10-v14, v16-v19) are strict xfails with the measured reason."""
    _fmt2_summary(version)
    _fmt2_report(version)
    s, _, _ = _fmt2_resummarized(version)
    h = _fmt2_static_graph(version).heaviest()
    top = s["heaviest"]
    assert (top["waiter"], top["barrier"], top["releaser"]) == (h.waiter, h.barrier, h.releaser)


def test_format2_verdict_hangs_on_the_unmeasured_park():
    """v10 and v11 cannot measure a park's cost (no parked wait of theirs found its group done: v10's shortest
    takes 192 cycles and none takes under 150, where 84-97% of v12-v19's parked waits take under 100), so their
    wgmma edge is counted with the bound (the ordinary stamp). The park cost under which their wgmma edge would
    be the heaviest: v10 129.8 cycles, between every measured park (v12-v19: 26-39) and v10's bound (151), so v10
    agrees for any park cost the other rungs measured; v11 16.3 cycles, below all of them, so v11 disagrees
    for all of them. From the committed summaries (the wgmma edge's raw intervals and waits, the heaviest other
    edge) and v10's raw events."""
    import numpy as np

    from profiler.analyze.event_trace import _slots, load_raw

    def threshold(version):
        s = _fmt2_summary(version)
        wg = next(e for e in s["edges"] if e["barrier"] == "wgmma group")
        other = max(e["warp_cycles"] for e in s["edges"] if e is not wg)
        n = s["warps_per_wait"]["consumer"]
        return (wg["raw_cycles"] * n - other) / (wg["waits"] * n), s

    measured = [_fmt2_summary(v)["park_cycles"] for v in FMT2_VERSIONS[2:]]
    assert not any(_fmt2_summary(v)["park_bounded_by_stamp"] for v in FMT2_VERSIONS[2:])
    assert (min(measured), max(measured)) == (26, 39)
    t10, s10 = threshold("v10_warp_specialized")
    t11, s11 = threshold("v11_pingpong")
    assert (round(t10, 1), round(t11, 1)) == (129.8, 16.3)
    assert max(measured) < t10 < s10["park_cycles"] == 151 and s10["park_bounded_by_stamp"]
    assert t11 < min(measured) and s11["park_bounded_by_stamp"]
    assert s10["heaviest_uncalibrated"]["barrier"] == s11["heaviest_uncalibrated"]["barrier"] == "wgmma group"
    arrays, meta = load_raw(FORMAT2 / "v10_warp_specialized" / f"{SHAPE}.trace-raw.npz")
    parked = np.array([w.raw_cycles for sl in _slots(arrays, meta) for w in sl.waits if w.begin_parked])
    assert len(parked) == 16384 and parked.min() == 192 and not (parked < 150).any()
    for v in FMT2_VERSIONS[2:]:  # the rungs that measure it: most parked waits did not block
        arrays, meta = load_raw(FORMAT2 / v / f"{SHAPE}.trace-raw.npz")
        parked = np.array([w.raw_cycles for sl in _slots(arrays, meta) for w in sl.waits if w.begin_parked])
        assert (parked < 100).mean() > 0.8, v


def test_format2_v16_qk_waits_do_not_block_once_traced():
    """v16's static wgmma edge (6.9% of samples) is its QK^T waits (the loop's wait_group 1: 425 of the edge's
    459 samples), whose windows hold 32/28 untraced instructions (v15: 50/47, 116 of 142 samples); traced (4
    parked stamps more in each window) those waits take 60.2 cycles on average, a park's 26 and little more."""
    from profiler.analyze.event_trace import _slots, load_raw
    from profiler.report import load_report

    def qk_samples(version):
        site = next(x for x in _fmt2_static_graph(version).sites if x.kind == "wgmma_group")
        sass = load_report(_fmt2_report(version)).launches[0].sass
        by_off = dict(zip(sass["offset"].tolist(), zip(sass["sass"].tolist(), sass["samples"].fillna(0).tolist())))
        return site.samples, sum(int(by_off[pc][1]) for pc in site.pcs
                                 if by_off[pc][0].startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1"))

    assert qk_samples("v16_desc_iterator") == (459, 425)
    assert qk_samples("v15_softmax_under_pv") == (142, 116)
    arrays, meta = load_raw(FORMAT2 / "v16_desc_iterator" / f"{SHAPE}.trace-raw.npz")
    w1 = [w.raw_cycles for sl in _slots(arrays, meta) if sl.role == "consumer" for w in sl.waits
          if w.kind == "wgmma_group" and w.key == 1]
    assert (len(w1), round(sum(w1) / len(w1), 1)) == (7928, 60.2)


# v17-v19, from their committed reports (the untraced build's windows: instructions between the HGMMA group's
# last gsb0 and its DEPBAR, samples at the DEPBAR) and raw events: {version: (QK^T windows (wait_group 1, the
# two loops), their samples, PV windows (the loops' wait_group 0 after the softmax), their samples, the other
# wgmma samples (a tile's first QK^T, its last PV), the traced QK^T waits' mean raw cycles)}
TMA_STORE_WGMMA = {
    "v17_tma_store_o": ((47, 49), 311 + 80, (148, 141), 608 + 48, 20 + 7, 34.3),
    "v18_desc_iterator_o": ((26, 28), 600 + 63, (148, 141), 617 + 33, 26 + 10, 33.9),
    "v19_lazy_rescale": ((26, 28), 711 + 59, (148, 137), 618 + 86, 23 + 10, 59.6),
}


@pytest.mark.parametrize("version", TMA_STORE_RUNGS)
def test_format2_tma_store_rungs_wgmma_waits_do_not_block_once_traced(version):
    """v17-v19's static wgmma edge (17.2/22.1/24.2% of samples) is their loops' PV and QK^T waits, about half
    each; traced, no QK^T wait blocks (every one under block_cycles = 200 once calibrated; mean 34.3/33.9/59.6
    cycles, a park 29/29/31) and the whole edge is 0.9-1.0% of warp-cycles, 3.6-3.9M uncalibrated against the
    empty ring's 14.1-14.5M, so no park cost would make it the heaviest. Their traced PV windows hold the
    softmax (scripts/trace_windows.py: 458/415 traced vs 148/141 untraced instructions, v19 484/440 vs
    148/137; reports/h200/traces/sass-windows.txt), v14's schedule that ncu does not sample; v18/v19's QK^T
    windows are v16's short ones (26/28 untraced, 47/51 traced: four parked stamps each)."""
    from profiler.analyze.event_trace import _slots, load_raw
    from profiler.report import load_report

    s = _fmt2_summary(version)
    tw = _trace_windows()
    sass = load_report(_fmt2_report(version)).launches[0].sass
    seq = [(int(o), str(x)) for o, x in zip(sass["offset"], sass["sass"])]
    samples = dict(zip(sass["offset"].tolist(), sass["samples"].fillna(0).astype(int).tolist()))
    win = [(w["wait_n"], len(w["body"]), samples[w["wait"]]) for w in tw.windows(seq)]
    qk = [(n, k) for wn, n, k in win if wn == 1]
    pv = [(n, k) for wn, n, k in win if wn == 0 and n > 130]
    rest = [k for wn, n, k in win if wn == 0 and n <= 130]
    qk_len, qk_samples, pv_len, pv_samples, rest_samples, qk_mean = TMA_STORE_WGMMA[version]
    assert (tuple(n for n, _ in qk), sum(k for _, k in qk)) == (qk_len, qk_samples)
    assert (tuple(n for n, _ in pv), sum(k for _, k in pv)) == (pv_len, pv_samples)
    site = next(x for x in _fmt2_static_graph(version).sites if x.kind == "wgmma_group")
    assert site.samples == qk_samples + pv_samples + sum(rest) and sum(rest) == rest_samples
    arrays, meta = load_raw(FORMAT2 / version / f"{SHAPE}.trace-raw.npz")
    w1 = [w for sl in _slots(arrays, meta) if sl.role == "consumer" for w in sl.waits
          if w.kind == "wgmma_group" and w.key == 1]
    park = s["park_cycles"]
    assert len(w1) == 7928 and round(sum(w.raw_cycles for w in w1) / len(w1), 1) == qk_mean
    assert max(w.raw_cycles for w in w1) - park <= 200
    wg = next(e for e in s["edges"] if e["barrier"] == "wgmma group")
    top = s["edges"][0]
    assert top["barrier"] == "mbarrier@0x430×2" and wg["raw_cycles"] * 4 < top["warp_cycles"]


OVERHEAD_HYPOTHESIS = pytest.mark.xfail(strict=True, reason=(
    "the hypothesis written before the run (scripts/device/h200_trace.sh, +10-40%) held for v10 only: v11-v16 ran "
    "+46.2/+52.4/+48.8/+53.9/+50.2/+52.5% longer traced (v17-v19, measured later with no hypothesis of their "
    "own, +70.0/+68.5/+65.1%: the same stamps over a 62-63 us kernel); the parked stamps moved the work to the "
    "flush (wait_group 0's end, 58-65 instructions, one dependent LDS -> STG per parked event) and it costs more "
    "there"))


@pytest.mark.parametrize("version", [FMT2_VERSIONS[0], *(pytest.param(v, marks=OVERHEAD_HYPOTHESIS)
                                                          for v in FMT2_VERSIONS[1:])])
def test_format2_overhead_as_hypothesised(version):
    pct = _fmt2_summary(version)["overhead"]["overhead_pct"]
    assert 10 <= pct <= 40


def test_format2_costs_more_than_format1():
    """Same rungs, same shape, two runs: format 1 (e303d95) +10.6/+26.9/+33.4%, format 2 (c1c9c6e)
    +28.9/+46.2/+52.4% for v10-v12."""
    f1 = [round(_summary(v)["overhead"]["overhead_pct"], 1) for v in VERSIONS]
    f2 = [round(_fmt2_summary(v)["overhead"]["overhead_pct"], 1) for v in VERSIONS]
    assert (f1, f2) == ([10.6, 26.9, 33.4], [28.9, 46.2, 52.4])


def test_format2_perfetto_json_marks_parked_events():
    import gzip

    path = FORMAT2 / "v15_softmax_under_pv" / f"{SHAPE}.trace.json.gz"
    if not path.exists():
        pytest.skip("no committed trace")
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    waits = [e for e in ev if e["ph"] == "X"]
    assert all(e["dur"] >= 0 for e in waits)
    names = {e["name"] for e in waits}
    assert {"wait mbarrier@0x430×2", "wait mbarrier@0x440×2", "wait bar (runtime id)", "wait wgmma group"} <= names
    parked = [e for e in ev if e["ph"] == "i" and e.get("args", {}).get("parked")]
    assert len(parked) > 0 and all(w["args"].get("begin_parked") for w in waits if w["cat"] == "wgmma_group")


# --- trace format 2 (parked stamps) on raw arrays written by hand ----------------------------------------
# One CTA of v12 at its steady state, the events in the order the traced build stamps them (tests above:
# kernels/v12_intra_wg_overlap/kernel.cu's loop body with trace.cuh's choice of stamp per event): consumer 0
# (warpgroup 1) waits full_k, full_v (ordinary), bar.sync its turn (ordinary), then parks QK^T's commit, PV's
# commit, the bar.arrive handing the turn on, wait_group 1's begin and end, the empty_k arrive, wait_group 0's
# begin; wait_group 0's end is the ordinary stamp that copies those out (same order, own clocks); the empty_v
# arrive after it is parked until the next iteration's full_k wait begin. The producer (warpgroup 0) issues
# both loads (expect_tx, ordinary) and waits on empty_k. Consumer 1 (warpgroup 2) holds one PARK_DROPPED
# event (3 parked events lost). Cycle figures are chosen: an ordinary stamp leaves 100 cycles in a wait that
# did not block, a parked begin 8.
P = 0x100  # PARKED_BIT
FK, FV, EK, EV = 0x400, 0x410, 0x420, 0x430
HAND = {
    0: [(900, 5, FK), (950, 5, FV), (2200, 2, EK), (2500, 3, EK)],
    1: [(1000, 2, FK), (1100, 3, FK), (1200, 2, FV), (1300, 3, FV), (1400, 6, 1), (1900, 7, 1),
        (2000, 11 | P, 0), (2050, 11 | P, 0), (2060, 8 | P, 2), (2070, 9 | P, 1), (2400, 10 | P, 1),
        (2410, 4 | P, EK), (3000, 9 | P, 0), (3008, 10, 0), (3200, 4 | P, EV), (3500, 2, FK), (3600, 3, FK)],
    2: [(1000, 2, FK), (1150, 3, FK), (1600, 12, 3)],
}


def _hand_arrays(parked_bits: bool = True, hand: dict | None = None):
    import numpy as np

    cap = 24
    t = np.zeros((4, cap), np.uint64)
    kind = np.zeros((4, cap), np.uint32)
    arg = np.zeros((4, cap), np.uint32)
    counts = np.zeros(4, np.int64)
    for wg, evs in (hand or HAND).items():
        rows = [(10, 0, 7), (5_000_000, 1, 0)] + [(tt, k if parked_bits else k & ~P, a) for tt, k, a in evs]
        for i, (tt, k, a) in enumerate(rows):
            t[wg, i], kind[wg, i], arg[wg, i] = tt, k, a
        counts[wg] = len(rows)
    meta = {"version": "v12_intra_wg_overlap", "shape": SHAPE, "slots_per_cta": 4, "untraced_ms": 0.1,
            "traced_ms": 0.11, "overhead_pct": 10.0, "clock_rate_khz": 1_980_000, "dropped_events": 0}
    return {"counts": counts, "t": t, "kind": kind, "arg": arg}, meta


def test_format2_parked_events_are_decoded_and_calibrated_apart():
    from profiler.analyze.event_trace import _slots, summarize

    arrays, meta = _hand_arrays()
    slots = {s.wg: s for s in _slots(arrays, meta)}
    c0 = slots[1]
    assert [k for _, k, _ in c0.events] == [k & ~P for _, k, _ in HAND[1]]  # kinds masked, order kept
    assert len(c0.parked) == 8
    wg = [w for w in c0.waits if w.kind == "wgmma_group"]
    assert [(w.key, w.begin, w.end, w.begin_parked) for w in wg] == [(1, 2070, 2400, True), (0, 3000, 3008, True)]
    assert not any(w.begin_parked for w in c0.waits if w.kind != "wgmma_group")
    assert slots[2].dropped == 3 and all(k != 12 for _, k, _ in slots[2].events)

    s = summarize(arrays, meta, {FK: "full_k", FV: "full_v", EK: "empty_k", EV: "empty_v"})
    assert s["trace_format"] == 2 and s["parked_events"] == 8 and s["dropped_events"] == 3
    assert s["stamp_cycles"] == {"producer": 100, "consumer": 100} and s["park_cycles"] == 8
    e = {(x["waiter"], x["barrier"]): x for x in s["edges"]}
    assert e["consumer", "wgmma group"]["cycles"] == (330 - 8) + (8 - 8)
    assert e["consumer", "bar 1"]["cycles"] == 500 - 100  # nobody in this CTA arrives on bar 1: unresolved
    assert e["producer", "empty_k"]["cycles"] == 300 - 100
    # untraced estimate: wait_group 1 (blocked) + the 3 parked stamps since QK^T's commit (8 each), wait_group 0
    # (did not block: upper bound only) + the 5 parked stamps since PV's commit
    u = s["wgmma_untraced"]
    assert (u["cycles_lo"], u["cycles_hi"]) == (330 + 3 * 8, 330 + 3 * 8 + 8 + 5 * 8)
    assert u["stamps_between_commit_and_wait_median"] == 4.0
    assert u["stamp_cycles_between_commit_and_wait_median"] == 32.0


def test_format2_park_cost_bounded_by_the_stamp_where_every_parked_wait_blocked():
    """A park leaves less work in a wait than an ordinary stamp (a shared store; no global store, no branch), so
    where the shortest parked wait is longer than the stamp, it blocked (the committed format-2 v10: every
    wgmma wait follows its commit by one parked stamp and no kernel instruction; shortest 192 cycles, stamp
    151): the park's cost is then bounded by the stamp, said so, and the untraced estimate's lower bound gives
    back nothing for a park. The same events as above with wait_group 0 ending at 3250 instead of 3008."""
    from profiler.analyze.event_trace import summarize

    hand = {**HAND, 1: [(3250, 10, 0) if (tt, k) == (3008, 10) else (3260, 4 | P, EV) if tt == 3200 else (tt, k, a)
                        for tt, k, a in HAND[1]]}
    arrays, meta = _hand_arrays(hand=hand)
    s = summarize(arrays, meta)
    assert s["stamp_cycles"]["consumer"] == 100 and s["park_shortest_wait_cycles"] == 250
    assert s["park_cycles"] == 100 and s["park_bounded_by_stamp"] is True
    e = {(x["waiter"], x["barrier"]): x for x in s["edges"]}
    assert e["consumer", "wgmma group"]["cycles"] == (330 - 100) + (250 - 100)  # was (330 - 250) + 0 unbounded
    u = s["wgmma_untraced"]
    # wait_group 1 blocked (330 > 250 + 64): lower bound 330 + 3 parks x 0; upper 330 + 3 x 100 and wait_group 0's
    # 250 + 5 x 100 (it did not block, relative to the shortest wgmma wait: upper bound only)
    assert (u["cycles_lo"], u["cycles_hi"]) == (330, 330 + 3 * 100 + 250 + 5 * 100)
    # where a parked wait did not block (the events above, shortest 8 cycles), the park is measured, not bounded
    s2 = summarize(*_hand_arrays())
    assert s2["park_cycles"] == s2["park_shortest_wait_cycles"] == 8 and s2["park_bounded_by_stamp"] is False


def test_format1_reading_of_the_same_events_is_unchanged():
    """Without the parked bits (format 1, the committed traces) every stamp is ordinary: the shortest wait of
    any kind calibrates all of them, and no format-2 key appears (the committed summaries stay as they are)."""
    from profiler.analyze.event_trace import summarize

    arrays, meta = _hand_arrays(parked_bits=False)
    s = summarize(arrays, meta)
    assert "trace_format" not in s and "park_cycles" not in s
    assert s["stamp_cycles"]["consumer"] == 8  # wait_group 0's 8 cycles: the launch's shortest wait
    u = s["wgmma_untraced"]
    assert "stamp_cycles_between_commit_and_wait_median" not in u
    # k·stamp with stamp = 8 (chosen equal to the format-2 park cost, so the figures coincide)
    assert (u["cycles_lo"], u["cycles_hi"]) == (330 + 3 * 8, 330 + 3 * 8 + 8 + 5 * 8)
    assert s["dropped_events"] == 3  # a PARK_DROPPED event is counted whatever the format says


def test_format2_chrome_trace_marks_parked_events():
    from profiler.analyze.event_trace import chrome_trace

    arrays, meta = _hand_arrays()
    tr = chrome_trace(arrays, meta)
    inst = [e for e in tr["traceEvents"] if e["ph"] == "i" and e["tid"] == 1]
    assert [e["name"] for e in inst][:3] == ["wgmma commit", "wgmma commit", "bar.arrive bar 2"]
    assert all(e.get("args", {}).get("parked") for e in inst)
    waits = [e for e in tr["traceEvents"] if e["ph"] == "X" and e["cat"] == "wgmma_group"]
    assert [e["args"]["cycles"] for e in waits] == [330, 8] and all(e["args"]["begin_parked"] for e in waits)


def test_host_tail_is_the_headers():
    """kernels/tracebuild.py asks for the dynamic-smem tail trace.cuh addresses (cursors + parking areas, after the
    kernel's own bytes, so the kernel's mbarriers do not move)."""
    from kernels import tracebuild as T
    from kernels.build import KERNELS_DIR

    text = (KERNELS_DIR / "common/sm90/trace.cuh").read_text()
    slots = int(re.search(r"#define WHOWAITS_TRACE_SLOTS (\d+)", text).group(1))
    park = int(re.search(r"#define WHOWAITS_TRACE_PARK (\d+)", text).group(1))
    dropped = int(re.search(r"kTraceParkDropped = (\d+)u", text).group(1))
    bit = int(re.search(r"kTraceParkedBit = (0x[0-9a-f]+)u", text).group(1), 16)
    assert (T.SLOTS, T.PARK, T.PARK_DROPPED) == (slots, park, dropped)
    assert T.TAIL_BYTES == slots * (16 + park * 16)
    from profiler.analyze import event_trace as A

    assert (A.PARKED_BIT, A.PARK_DROPPED) == (bit, dropped)


def test_end_pair_fits_the_clock_of_one_persistent_cta_per_sm():
    """trace.cuh's finish() writes each slot's end pair (kTraceEnd = 13 with %smid, then a globaltimer): with the
    start pair that is two points on the SM's clock line, so a launch with one CTA per SM (v13/v14, persistent)
    fits the clock instead of falling back to the nominal one; the end pair is no event of the kernel's (the
    slot's events, first and last stamps are what they were without it)."""
    import numpy as np

    from profiler.analyze.event_trace import END, _clock_ghz, _slots

    text = (ROOT / "kernels/common/sm90/trace.cuh").read_text()
    assert int(re.search(r"kTraceEnd = (\d+)u", text).group(1)) == END

    ghz, sms, cap = 1.755, 8, 12  # cycles per ns (a clock below the nominal 1.98 GHz), one CTA per SM
    t = np.zeros((sms * 4, cap), np.uint64)
    kind = np.zeros((sms * 4, cap), np.uint32)
    arg = np.zeros((sms * 4, cap), np.uint32)
    counts = np.zeros(sms * 4, np.int64)
    for cta in range(sms):
        for wg in (1, 2):  # the consumers (the producer returns before finish(): no end pair)
            s = cta * 4 + wg
            c0, g0 = 1_000_000 * (cta + 1), 7_000_000 + 3 * cta
            ns = 40_000  # the launch: 40 us
            rows = [(c0, 0, cta), (g0, 1, 0), (c0 + 500, 2, 0x400), (c0 + 900, 3, 0x400),
                    (c0 + int(ns * ghz), END, cta), (g0 + ns, 1, 0)]
            for i, (tt, k, a) in enumerate(rows):
                t[s, i], kind[s, i], arg[s, i] = tt, k, a
            counts[s] = len(rows)
    arrays = {"counts": counts, "t": t, "kind": kind, "arg": arg}
    meta = {"slots_per_cta": 4, "clock_rate_khz": 1_980_000}
    slots = _slots(arrays, meta)
    assert all([k for _, k, _ in sl.events] == [2, 3] and sl.last == sl.clk0 + 900 for sl in slots)
    got, how = _clock_ghz(slots, meta)
    assert abs(got - ghz) < 1e-3 and how.startswith(f"fitted on {sms} SMs")
    # the same launch without end pairs (a format-1 trace of a persistent rung): the nominal clock, said so
    for s in range(sms * 4):
        if counts[s]:
            counts[s] -= 2
    got, how = _clock_ghz(_slots(arrays, meta), meta)
    assert got == 1.98 and "no SM with 2 clock points" in how
