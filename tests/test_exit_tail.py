"""The kernel's exit path (``profiler.analyze.stalls.exit_tail``): warps with no work left, parked at the fences and
the last barrier before EXIT, are counted per who_waits cell as ``at_exit`` and left out of the top waiter.

- the rule on hand-written SASS: v38's own exit sequence (``whowaits show`` of
  reports/h200/v38_kv_multicast4/b4_h16_s4096_d128_fp16.ncu-rep, PCs 2897-2909, read by hand: the consumers' loop
  branches to the WARPSYNC.ALL, the producer's spare warps reach it at once; 21,637 of its 86,580 stall samples sit
  on the UCGABAR_WAIT), and the cases that end a run;
- properties over real reports of many kernels (ours, cuDNN, cuBLAS, CUTLASS, Triton): every marked run ends at an
  unpredicated EXIT and holds only ``[exit_tail]`` opcodes, each cell's ``at_exit`` is its samples on marked PCs, the
  top waiter is the heaviest cell off the exit path;
- the cluster rungs (v26, v38, v39: cluster.sync before EXIT) park ~25% of their samples there, and their top waiter
  is the consumers' wgmma wait, where it was the UCGABAR_WAIT; kernels without a cluster barrier park < 2% (Triton's
  warp-specialised matmul 1.2%: bar.sync + EXIT after its TMA store).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT

# v38_kv_multicast4's last instructions (b4_h16_s4096_d128_fp16, `whowaits show`'s SASS), by hand
V38_TAIL = [
    ("ISETP.GE.AND", "ISETP.GE.AND P0, PT, R12, UR6, PT"),
    ("BRA", "@!P0  BRA 0x7f80cd7c0400"),
    ("WARPSYNC.ALL", "WARPSYNC.ALL"),
    ("MEMBAR.ALL.CTA", "MEMBAR.ALL.CTA"),
    ("MEMBAR.ALL.GPU", "MEMBAR.ALL.GPU"),
    ("ERRBAR", "ERRBAR"),
    ("CGAERRBAR", "CGAERRBAR"),
    ("UCGABAR_ARV", "UCGABAR_ARV"),
    ("UCGABAR_WAIT", "UCGABAR_WAIT"),
    ("CCTL.IVALL", "CCTL.IVALL"),
    ("EXIT", "EXIT"),
    ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR8], R11"),
    ("BRA", "@!P0  BRA 0x7f80cd7c10b0"),
]


def _frame(rows):
    return pd.DataFrame({"opcode": [o for o, _ in rows], "sass": [t for _, t in rows]})


def test_exit_tail_on_v38s_sass():
    from profiler.analyze.stalls import exit_tail

    mask = exit_tail(_frame(V38_TAIL))
    assert np.flatnonzero(mask).tolist() == list(range(2, 11))  # WARPSYNC.ALL .. EXIT, not the loop's branch


@pytest.mark.parametrize("rows, marked", [
    # a CTA's last bar.sync: ncu puts its samples on the next instruction, the EXIT
    ([("FFMA", "FFMA R1, R2, R3, R4"), ("BAR.SYNC.DEFER_BLOCKING", "BAR.SYNC.DEFER_BLOCKING 0x0"), ("EXIT", "EXIT"),
      ("BRA", "BRA 0x100")], [1, 2]),
    # a predicated EXIT anchors nothing: the warps that do not leave go on
    ([("BAR.SYNC", "BAR.SYNC 0x0"), ("EXIT", "@P0 EXIT"), ("FADD", "FADD R1, R1, R2")], []),
    # a TMA store's completion wait (DEPBAR) and a store end the run: that is work finishing, not idling
    ([("UTMASTG.2D", "UTMASTG.2D [UR4], [UR6]"), ("DEPBAR.LE", "DEPBAR.LE SB0, 0x0"), ("EXIT", "EXIT")], [2]),
    ([("STG.E", "STG.E [R2.64], R5"), ("EXIT", "EXIT")], [1]),
    # two exits: each anchors its own run; NOP padding after the last is not an exit path
    ([("MEMBAR.ALL.GPU", "MEMBAR.ALL.GPU"), ("EXIT", "EXIT"), ("IADD3", "IADD3 R1, R1, 0x1, RZ"),
      ("WARPSYNC.ALL", "WARPSYNC.ALL"), ("EXIT", "EXIT"), ("BRA", "BRA 0x40"), ("NOP", "NOP")], [0, 1, 3, 4]),
    ([], []),
])
def test_exit_tail_cases(rows, marked):
    from profiler.analyze.stalls import exit_tail

    assert np.flatnonzero(exit_tail(_frame(rows))).tolist() == marked


CLUSTER = ["reports/h200/v26_kv_multicast/b4_h16_s4096_d128_fp16.ncu-rep",
           "reports/h200/v26_kv_multicast/b1_h64_s1024_d128_fp16.ncu-rep",
           "reports/h200/v38_kv_multicast4/b4_h16_s4096_d128_fp16.ncu-rep",
           "reports/h200/v38_kv_multicast4/b1_h64_s1024_d128_fp16.ncu-rep",
           "reports/h200/v39_kv_multicast8/b4_h16_s4096_d128_fp16.ncu-rep"]
OTHERS = ["reports/h200/v34_q_regs/b4_h16_s4096_d128_fp16.ncu-rep",
          "reports/h200/v25_wide_kv/b1_h64_s1024_d128_fp16.ncu-rep",
          "reports/h200/v42_whole_head_rounds/b1_h64_s1024_d128_fp16.ncu-rep",
          "reports/h200/v13_persistent/b1_h64_s1024_d128_fp16.ncu-rep",
          "reports/h200/ext-sdpa-cudnn/b1_h64_s1024_d128_fp16.ncu-rep",
          "reports/h200/zoo/cublas-gemm-fp16/m8192_n8192_k8192_fp16.ncu-rep",
          "reports/h200/zoo/triton-matmul-ws/m8192_n8192_k8192_fp16.ncu-rep",
          "reports/h200/zoo/cutlass-grouped-mm/",
          "tests/public-reports/cutlass-panjd123/report-s8-persist.ncu-rep"]


def _reports():
    out = []
    for rel in CLUSTER + OTHERS:
        p = ROOT / rel
        out += sorted(p.glob("*.ncu-rep")) if p.is_dir() else [p]
    return out


@pytest.mark.parametrize("path", _reports(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_exit_tail_properties_on_real_reports(path):
    from profiler import metrics as M
    from profiler.analyze.stalls import exit_tail, who_waits
    from profiler.analyze.summary import summarize_launch
    from profiler.compare.diff import at_exit_samples, top_waiter
    from profiler.report import load_report

    launch = load_report(path).launches[0]
    sass = launch.sass
    mask = exit_tail(sass)
    base = sass["opcode"].str.split(".").str[0].to_numpy()
    text = sass["sass"].to_numpy(dtype=object)
    allowed = M.exit_tail_opcodes()
    for i in np.flatnonzero(mask):  # a marked PC: an exit-path opcode, and the run goes on to an unpredicated EXIT
        assert base[i] in allowed
        j = i
        while base[j] != "EXIT" or str(text[j]).lstrip().startswith("@"):
            j += 1
            assert mask[j], f"{path.name}: marked PC {i} does not run into an EXIT through marked PCs"
    reasons, mat = launch.stall_matrix()
    ww = who_waits(launch)
    assert (ww["at_exit"] <= ww["samples"]).all() and (ww["at_exit"] >= 0).all()
    assert int(ww["at_exit"].sum()) == int(mat[mask].sum())
    s = summarize_launch(launch)
    total = sum(w["samples"] for w in s["who_waits"])
    parked = at_exit_samples(s)
    top = top_waiter(s)
    if top is not None:  # the heaviest cell once the parked samples are out
        off = max(w["samples"] - w["at_exit"] for w in s["who_waits"] if w["reason"] not in ("selected", "not_selected"))
        assert top["samples"] == off
    rel = path.relative_to(ROOT).as_posix()
    if rel in CLUSTER:
        assert parked / total > 0.2, f"{rel}: {parked / total:.1%} parked at exit"
        assert top is not None and (top["class"], top["reason"]) == ("WARPGROUP", "barrier")
        regions = {r["name"]: r["share"] for r in s["regions"]}
        assert regions["sync"] > 0.4 and regions["load_kv"] < 0.1  # the parked warps are sync, not load_kv
    else:
        # Triton's warp-specialised matmul ends in bar.sync + EXIT after its TMA store: 1.2% parked there
        assert parked / total < 0.02, f"{rel}: {parked / total:.1%} parked at exit"


def test_merged_summaries_add_at_exit():
    from profiler.analyze.summary import summarize_launch
    from profiler.compare.merge import merge_launches
    from profiler.report import load_report

    s = summarize_launch(load_report(ROOT / CLUSTER[1]).launches[0])
    m = merge_launches([s, s])
    got = {(w["class"], w["reason"]): w["at_exit"] for w in m["who_waits"]}
    assert got == {(w["class"], w["reason"]): 2 * w["at_exit"] for w in s["who_waits"]}
