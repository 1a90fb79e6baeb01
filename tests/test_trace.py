"""The measured role trace (issue 12): the compile-time switch and the committed traces.

* ``-DWHOWAITS_TRACE`` off, the cubin's SASS is identical to a build whose headers carry no trace code at
  all (the same headers and kernels with every ``WHOWAITS_TRACE_*(...)`` line and the trace.cuh include
  removed), for v10-v14; on, it differs (clock64 reads). Compiled here, no GPU (nvcc 13.0 in the dev extra).
* On, the stamps inside every wgmma commit -> wait window of v10-v14 are parked ones (clock read + shared
  store, no load, no global store): scripts/trace_windows.py reads it from the SASS.
* The committed traces (reports/h200/traces/<version>/, measured on the H200 with ``whowaits trace``) are
  re-analysed from their raw events and agree with the static graph's heaviest edge of the same version.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

VERSIONS = ["v10_warp_specialized", "v11_pingpong", "v12_intra_wg_overlap"]  # the committed traces
WS_VERSIONS = [*VERSIONS, "v13_persistent", "v14_cross_tile_qk"]  # every traced ws rung
# the static proofs (off-switch identity, parked windows) also hold the prepared rungs of kernels/wip/, so that
# one lands ready to be traced (v15 is the rung whose traced and untraced schedules should agree: issue 10)
WIP_WS = ["v15_softmax_under_pv", "v16_desc_iterator"]
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


@pytest.mark.parametrize("version", [*WS_VERSIONS, *WIP_WS])
def test_switch_off_sass_identical_to_no_trace_code(version, untraced_headers, tmp_path):
    from kernels import build as B
    from kernels import registry
    from kernels import sass as S
    from kernels import trace as T
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
    # switch on: kernels.trace's traced build (this unit with WHOWAITS_TRACE 1 first), the one the trace runs
    # and test_stamps_inside_wgmma_windows_are_parked reads, from its cache when that test ran first
    assert T.traced_unit(ver, cfg) == "#define WHOWAITS_TRACE 1\n" + unit
    on = S.sass_text(T.build_traced(ver, cfg).cubin)
    assert on != off
    assert "SR_CLOCKLO" in on and "SR_CLOCKLO" not in off
    assert "SR_GLOBALTIMER" in on


# The bound the parked stamps hold (trace.cuh, format 2): inside every window from an HGMMA group's last
# ``HGMMA ... gsb0`` to the ``WARPGROUP.DEPBAR.LE`` that retires it, the traced build holds no load and no
# global store, and at most MAX_EXTRA_PER_CLOCK non-floating-point instructions more than the untraced build
# per clock read it adds (a parked stamp is 6: CS2R, ISETP, VIADD, two IMAD.MOV for kind/arg, a predicated
# STS.128). Floating-point, predicate-logic and uniform-datapath instructions are not counted: they are the
# kernel's own (the softmax and its masks, the next group's descriptor arithmetic), which the traced schedule moves into a window (v12-v14's
# PV window holds the softmax in the traced build, not in the untraced one, where ptxas hoists the PV wait).
# The previous header (ordinary stamps, fb0fdcc) fails it: 2-6 LDS and STG in every window.
MAX_EXTRA_PER_CLOCK = 8


def _trace_windows():
    import importlib.util

    spec = importlib.util.spec_from_file_location("trace_windows", ROOT / "scripts/trace_windows.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("version", [*WS_VERSIONS, *WIP_WS])
def test_stamps_inside_wgmma_windows_are_parked(version):
    _nvcc()
    tw = _trace_windows()
    r = tw.analyse(version)
    assert r["spill_stores_traced"] == 0 and r["spill_loads_traced"] == 0
    assert r["windows"], "every ws rung commits wgmma groups"
    for w in r["windows"]:
        where = f"{version} HGMMA {w['commit']} -> DEPBAR.LE {w['wait_n']} {w['wait']}"
        assert set(w["memory_ops"]) <= {"STS"}, (where, w["memory_ops"])  # no LDS, LDG, STG, atomics
        clocks = w["clock_reads"]
        assert w["trace_ops"] <= MAX_EXTRA_PER_CLOCK * max(clocks, 1), (where, clocks, w["extra_ops"])
        assert w["memory_ops"].get("STS", 0) <= clocks, (where, w["memory_ops"], clocks)


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
    "issue 12's done-when is not met by the committed traces (light stamp, e303d95): a stamp still costs "
    "97-144 cycles on the H200 (the launch's shortest wait), traced +11/+27/+33%, and the 1-3 stamps a "
    "consumer takes between a wgmma commit and its wait give the tensor core that time: the measured wgmma "
    "waits shrink to 5.0/1.7/1.4% of warp-cycles, so the heaviest traced edge is the consumers' Q wait at "
    "each CTA's start (7.6/7.7/7.4%), the static graph's second edge; see test_wgmma_untraced_estimate"))

@pytest.mark.parametrize("version", [pytest.param(v, marks=NOT_MET) for v in VERSIONS])
def test_trace_heaviest_edge_agrees_with_static_graph(version):
    """Done-when of issue 12: the measured trace and the static graph (ncu samples of the committed
    report) name the same heaviest edge, for the same version (trace edges weighted by the warps that
    wait, as ncu's sampler weighs them)."""
    from profiler.analyze.roles import role_graph
    from profiler.analyze.trace import load_raw, summarize
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
    from profiler.analyze.trace import load_raw, summarize
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
    """The stamps between a wgmma commit and its wait given back (profiler/analyze/trace.py, "wgmma group,
    untraced estimate"): even the lower bound of the consumers' wgmma-group waits, untraced, outweighs every
    other traced edge, as the static graph says. Holds for v10 (22.0M..26.8M warp-cycles vs the Q wait's
    12.1M); v11/v12 undetermined."""
    from profiler.analyze.trace import load_raw, summarize
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


def _hand_arrays(parked_bits: bool = True):
    import numpy as np

    cap = 24
    t = np.zeros((4, cap), np.uint64)
    kind = np.zeros((4, cap), np.uint32)
    arg = np.zeros((4, cap), np.uint32)
    counts = np.zeros(4, np.int64)
    for wg, evs in HAND.items():
        rows = [(10, 0, 7), (5_000_000, 1, 0)] + [(tt, k if parked_bits else k & ~P, a) for tt, k, a in evs]
        for i, (tt, k, a) in enumerate(rows):
            t[wg, i], kind[wg, i], arg[wg, i] = tt, k, a
        counts[wg] = len(rows)
    meta = {"version": "v12_intra_wg_overlap", "shape": SHAPE, "slots_per_cta": 4, "untraced_ms": 0.1,
            "traced_ms": 0.11, "overhead_pct": 10.0, "clock_rate_khz": 1_980_000, "dropped_events": 0}
    return {"counts": counts, "t": t, "kind": kind, "arg": arg}, meta


def test_format2_parked_events_are_decoded_and_calibrated_apart():
    from profiler.analyze.trace import _slots, summarize

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


def test_format1_reading_of_the_same_events_is_unchanged():
    """Without the parked bits (format 1, the committed traces) every stamp is ordinary: the shortest wait of
    any kind calibrates all of them, and no format-2 key appears (the committed summaries stay as they are)."""
    from profiler.analyze.trace import summarize

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
    from profiler.analyze.trace import chrome_trace

    arrays, meta = _hand_arrays()
    tr = chrome_trace(arrays, meta)
    inst = [e for e in tr["traceEvents"] if e["ph"] == "i" and e["tid"] == 1]
    assert [e["name"] for e in inst][:3] == ["wgmma commit", "wgmma commit", "bar.arrive bar 2"]
    assert all(e.get("args", {}).get("parked") for e in inst)
    waits = [e for e in tr["traceEvents"] if e["ph"] == "X" and e["cat"] == "wgmma_group"]
    assert [e["args"]["cycles"] for e in waits] == [330, 8] and all(e["args"]["begin_parked"] for e in waits)


def test_host_tail_is_the_headers():
    """kernels/trace.py asks for the dynamic-smem tail trace.cuh addresses (cursors + parking areas, after the
    kernel's own bytes, so the kernel's mbarriers do not move)."""
    from kernels import trace as T
    from kernels.build import KERNELS_DIR

    text = (KERNELS_DIR / "common/sm90/trace.cuh").read_text()
    slots = int(re.search(r"#define WHOWAITS_TRACE_SLOTS (\d+)", text).group(1))
    park = int(re.search(r"#define WHOWAITS_TRACE_PARK (\d+)", text).group(1))
    dropped = int(re.search(r"kTraceParkDropped = (\d+)u", text).group(1))
    bit = int(re.search(r"kTraceParkedBit = (0x[0-9a-f]+)u", text).group(1), 16)
    assert (T.SLOTS, T.PARK, T.PARK_DROPPED) == (slots, park, dropped)
    assert T.TAIL_BYTES == slots * (16 + park * 16)
    from profiler.analyze import trace as A

    assert (A.PARKED_BIT, A.PARK_DROPPED) == (bit, dropped)


def test_end_pair_fits_the_clock_of_one_persistent_cta_per_sm():
    """trace.cuh's finish() writes each slot's end pair (kTraceEnd = 13 with %smid, then a globaltimer): with the
    start pair that is two points on the SM's clock line, so a launch with one CTA per SM (v13/v14, persistent)
    fits the clock instead of falling back to the nominal one; the end pair is no event of the kernel's (the
    slot's events, first and last stamps are what they were without it)."""
    import numpy as np

    from profiler.analyze.trace import END, _clock_ghz, _slots

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
