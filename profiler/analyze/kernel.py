"""Barriers, tensor-core utilisation, roofline and launch shape of one launch.

Pure functions of a :class:`~profiler.report.Launch`. Every ncu metric name comes from
``data/metrics.toml`` through canonical names; the formulas are written beside the code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze._common import missing, with_missing
from profiler.names import LEVELS, NCU_LEVELS, SMEM_OPS

_SOURCE_COUNTERS = "SourceCounters"


# --- barriers -----------------------------------------------------------------------------------


def barriers(launch) -> pd.DataFrame:
    """Barrier-type instructions (``[barriers]`` of ``data/opcode_classes.toml``: BAR, SYNCS
    (mbarrier), MEMBAR/FENCE, WARPGROUP arrive/wait, DEPBAR, LDGDEPBAR, WARPSYNC, BSYNC, …), by
    opcode with modifiers, sorted by executed count.

    Columns: ``opcode`` (str, e.g. ``SYNCS.PHASECHK.TRANS64.TRYWAIT``), ``opcode_class`` (str),
    ``static`` (int64: instructions of this opcode in the function's SASS), ``executed``
    (Int64: warp-level executions, the per-PC ``inst_executed`` summed; <NA> without
    SourceCounters), ``samples`` (int64: stall samples sitting on them), ``top_reason``
    (str or None: their dominant stall reason).
    """
    sass = launch.sass
    cols = ["opcode", "opcode_class", "static", "executed", "samples", "top_reason"]
    if len(sass) == 0:
        return with_missing(pd.DataFrame(columns=cols), [missing("barriers", _SOURCE_COUNTERS)])
    mask = sass["base"].isin(M.barrier_opcodes()).to_numpy()
    sub = sass[mask]
    reasons, mat = launch.stall_matrix()
    mat = mat[mask]
    has_exec = "inst_executed" in sub.columns
    rows = []
    for op, idx in sub.groupby("opcode", sort=False).indices.items():
        stalls = mat[idx].sum(axis=0) if mat.shape[1] else np.zeros(0)
        rows.append(
            (
                op,
                sub["opcode_class"].iat[idx[0]],
                len(idx),
                int(sub["inst_executed"].to_numpy()[idx].sum()) if has_exec else None,
                int(stalls.sum()),
                reasons[int(stalls.argmax())] if stalls.sum() > 0 else None,
            )
        )
    df = pd.DataFrame(rows, columns=cols)
    df["executed"] = pd.array(df["executed"].tolist(), dtype="Int64")
    df = df.sort_values(["executed", "static", "opcode"], ascending=[False, False, True])
    gone = [] if has_exec else [missing("barriers.executed", _SOURCE_COUNTERS)]
    return with_missing(df.reset_index(drop=True), gone)


# --- tensor cores -------------------------------------------------------------------------------


def _class_executed(launch, cls: str):
    """Executed instructions of an opcode class: per-PC inst_executed summed (SourceCounters),
    else the report's ``sass__inst_executed_per_opcode`` table (InstructionStats)."""
    sass = launch.sass
    if len(sass) and "inst_executed" in sass.columns:
        return int(sass.loc[sass["opcode_class"] == cls, "inst_executed"].sum())
    table = launch.instances("sass__inst_executed_per_opcode")
    if table:
        return int(sum(v for op, v in table.items() if M.classify_opcode(op) == cls))
    return None


def _tensor_flops(launch) -> tuple[dict, list]:
    """FLOPs per tensor path: the sum of that path's dense ops counters (2 FLOP per MAC)."""
    out, gone = {}, []
    for path, (counters, section) in M.tensor_op_counters().items():
        vals = [launch.value(c) for c in counters]
        present = [v for v in vals if v is not None]
        out[path] = float(sum(present)) if present else None
        if not present:
            gone.append(missing(f"roofline.flops_by_path.tensor_{path}", section))
    return out, gone


def tensor_util(launch) -> pd.DataFrame:
    """Tensor-core utilisation and the path that carries it (one row).

    On gh100 ``sm__pipe_tensor_op_hmma_cycles_active`` also counts HGMMA (wgmma), so the pipe %
    says how busy, and the executed instruction counts say which path: HMMA (mma.sync) vs HGMMA
    (wgmma) class instructions of the SASS.

    Columns: ``tensor_pipe_pct`` (float: tensor pipe active, % of peak over active cycles),
    ``tensor_pipe_pct_elapsed`` (float: same over elapsed cycles), ``hmma_inst`` (Int64:
    executed HMMA-class instructions), ``hgmma_inst`` (Int64: executed HGMMA-class),
    ``hmma_inst_pct`` / ``gmma_inst_pct`` (float: ``sm__inst_executed_pipe_tensor_op_{hmma,gmma}``
    % of peak — the hmma one counts wgmma too on gh100), ``path`` (str: ``hmma``, ``gmma``,
    ``mixed``, ``none``; None when instruction counts are missing), ``flops_hmma``,
    ``flops_hgmma`` (float: tensor FLOPs by path from the ops counters).
    """
    gone = []
    vals = {}
    for col, canon in [
        ("tensor_pipe_pct", "tensor_pipe_pct"),
        ("tensor_pipe_pct_elapsed", "tensor_pipe_pct_elapsed"),
        ("hmma_inst_pct", "tensor_hmma_inst_pct"),
        ("gmma_inst_pct", "tensor_gmma_inst_pct"),
    ]:
        v, _ = launch.get(canon)
        vals[col] = np.nan if v is None else float(v)
        if v is None:
            gone.append(missing(col, M.metric_spec(canon).section))
    hmma, hgmma = _class_executed(launch, "HMMA"), _class_executed(launch, "HGMMA")
    if hmma is None or hgmma is None:
        path = None
        gone.append(missing("tensor_path", _SOURCE_COUNTERS))
    else:
        path = {(False, False): "none", (True, False): "hmma", (False, True): "gmma"}.get(
            (hmma > 0, hgmma > 0), "mixed"
        )
    flops, gone_f = _tensor_flops(launch)
    df = pd.DataFrame(
        {
            "tensor_pipe_pct": [vals["tensor_pipe_pct"]],
            "tensor_pipe_pct_elapsed": [vals["tensor_pipe_pct_elapsed"]],
            "hmma_inst": pd.array([hmma], dtype="Int64"),
            "hgmma_inst": pd.array([hgmma], dtype="Int64"),
            "hmma_inst_pct": [vals["hmma_inst_pct"]],
            "gmma_inst_pct": [vals["gmma_inst_pct"]],
            "path": [path],
            "flops_hmma": [np.nan if flops.get("hmma") is None else flops["hmma"]],
            "flops_hgmma": [np.nan if flops.get("hgmma") is None else flops["hgmma"]],
        }
    )
    return with_missing(df, gone + gone_f)


# --- roofline -----------------------------------------------------------------------------------

# LEVELS: the roofline's memory levels, innermost last: ncu's three (L1 = LSU writeback, L2, DRAM) and
# shared memory (``sm__sass_data_bytes_mem_shared``), a level of our own. SMEM_OPS: shared-memory
# instruction kinds with their own byte counter (``…_mem_shared_op_<op>``). Both from profiler.names.


def roofline(launch) -> pd.DataFrame:
    """Roofline quantities of one launch, as a long frame (one row per quantity).

    FLOPs (CC 9.0, as ncu's roofline sections count them):
      tensor, per path  = sum of ``sm__ops_path_tensor_op_{hmma,hgmma}_src_*_sparsity_off.sum``
                          (ops counters count 2 FLOP per multiply-add);
      fp32              = (fadd + fmul + 2*ffma) with each
                          ``smsp__sass_thread_inst_executed_op_<op>_pred_on.sum.per_cycle_elapsed``
                          x ``smsp__cycles_elapsed.avg``;
      fp16 (non-tensor) = (2*hadd + 2*hmul + 4*hfma), same counters for h* ops (packed HFMA2);
      flops             = tensor + fp32 + fp16.
    Bytes (rate x ``gpu__time_duration.sum``):
      l1   = ``derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second`` (LSU global/local/
             shared writeback; TMA and LDSM traffic are not in it),
      l2   = ``derived__lts__lts2xbar_bytes.sum.per_second`` (L2 -> SM),
      dram = ``dram__bytes.sum.per_second``;
    smem = ``sm__sass_data_bytes_mem_shared.sum`` + ``…_op_gmma.sum`` (counts, not rates: bytes
           the shared-memory SASS instructions move - LDS/STS, LDSM/STSM, LDGSTS, atomics - plus
           the wgmma operand reads; TMA writes are in neither). The total's description names
           HGMMA, but on gh100 (ncu 2025.3.1) it leaves them out: the cuDNN (wgmma) report has
           total = ld + st + stsm to the byte and 671 MB ``op_gmma`` besides. So op_gmma is added
           unless the total already holds it (total >= gmma + ld + st + ldsm + stsm + atom).
           ``bytes_smem_<op>`` = ``…_op_<op>.sum`` for op in ld, st, ldsm, stsm, ldgsts, gmma, atom:
           they do not add up to the total - ``op_ldgsts`` holds a few % of the cp.async bytes
           the total counts (v04: 39 MB vs ~550 MB).
    LDSM bank conflicts: ``ldsm_wavefronts``, ``ldsm_bank_conflicts`` (``sm__sass_l1tex_data_…_op_ldsm``),
    ``ldsm_conflict_ways`` = wavefronts / (wavefronts - conflicts) (1 = conflict-free).
    intensity_<level> = flops / bytes_<level>; achieved = flops / duration.
    Ceilings, preferring the report's own peaks (x the clock the kernel ran at,
    ``<unit>__cycles_elapsed.avg.per_second``), else ``data/gpus.toml``:
      tensor roof of the path used = that path's counter ``.peak_sustained`` (dense;
      the path-less ``sm__ops_path_tensor_src_*`` peak is the SPARSE one and is not used);
      the mma.sync (HMMA) roof sits below the wgmma (HGMMA) roof on Hopper;
      fp32 = 2 x ffma peak, fp16 = 4 x hfma peak; bandwidths = ``…bytes….peak_sustained`` x clock;
      smem bandwidth = ``smem_bytes_per_cycle_per_sm`` (gpus.toml, 128) x
      ``device__attribute_multiprocessor_count`` x ``l1tex__cycles_elapsed.avg.per_second``
      (the SM clock when the L1 clock is absent).
    attainable_<level> = min(compute ceiling, intensity_<level> x bandwidth_<level>).

    Columns: ``quantity`` (str), ``value`` (float; NaN when missing), ``unit`` (str),
    ``source`` (str: ncu metric(s) or formula).
    """
    rows: list[tuple] = []
    gone: list[dict] = []

    def get(canon: str, field: str):
        v, name = launch.get(canon)
        if v is None:
            gone.append(missing(field, M.metric_spec(canon).section))
            return None, M.metric_spec(canon).names[0]
        return float(v), name

    def add(q, v, unit, source):
        rows.append((q, np.nan if v is None else float(v), unit, source))

    duration_ns, dur_name = get("duration_ns", "duration_ns")
    duration_s = None if duration_ns is None else duration_ns * 1e-9
    sm_hz, sm_hz_name = get("sm_clock_hz", "roofline.ceilings.clock_hz")

    # FLOPs -------------------------------------------------------------------------------------
    tflops, gone_t = _tensor_flops(launch)
    gone += gone_t
    for path, v in tflops.items():
        add(f"flops_tensor_{path}", v, "FLOP", f"sum sm__ops_path_tensor_op_{path}_src_*_sparsity_off.sum")
    cyc, _ = get("smsp_cycles_elapsed", "roofline.flops_by_path.fp32")

    def thread_ops(canons: list[tuple[str, float]], field: str):
        total = 0.0
        for canon, weight in canons:
            v, _ = launch.get(canon)
            if v is None or cyc is None:
                gone.append(missing(field, M.metric_spec(canon).section))
                return None
            total += weight * float(v) * cyc
        return total

    fp32 = thread_ops([("fadd_per_cycle", 1), ("fmul_per_cycle", 1), ("ffma_per_cycle", 2)], "roofline.flops_by_path.fp32")
    fp16 = thread_ops([("hadd_per_cycle", 2), ("hmul_per_cycle", 2), ("hfma_per_cycle", 4)], "roofline.flops_by_path.fp16")
    add("flops_fp32", fp32, "FLOP", "(fadd+fmul+2*ffma) smsp__sass_thread_inst_executed_op_*_pred_on.sum.per_cycle_elapsed x smsp__cycles_elapsed.avg")
    add("flops_fp16", fp16, "FLOP", "(2*hadd+2*hmul+4*hfma) smsp__sass_thread_inst_executed_op_h*_pred_on.sum.per_cycle_elapsed x smsp__cycles_elapsed.avg")
    parts = [*tflops.values(), fp32, fp16]
    flops = None if any(p is None for p in parts) else float(sum(parts))
    add("flops", flops, "FLOP", "tensor_hmma + tensor_hgmma + fp32 + fp16")

    # bytes -------------------------------------------------------------------------------------
    bytes_ = {}
    for level in NCU_LEVELS:
        rate, name = get(f"{level}_bytes_per_second", f"roofline.bytes.{level}")
        b = None if rate is None or duration_s is None else rate * duration_s
        bytes_[level] = b
        add(f"bytes_{level}", b, "byte", f"{name} x {dur_name}")
    smem, smem_name = get("smem_bytes", "roofline.bytes.smem")
    by_op = {}
    for op in SMEM_OPS:
        v, name = get(f"smem_bytes_{op}", f"roofline.smem.bytes_by_op.{op}")
        by_op[op] = (v, name)
    gmma, gmma_name = by_op["gmma"]
    if smem is not None and gmma:
        known = gmma + sum(by_op[op][0] or 0.0 for op in ("ld", "st", "ldsm", "stsm", "atom"))
        if smem < known:  # the total left the wgmma operand reads out
            smem, smem_name = smem + gmma, f"{smem_name} + {gmma_name}"
    bytes_["smem"] = smem
    add("bytes_smem", smem, "byte", smem_name)
    for op, (v, name) in by_op.items():
        add(f"bytes_smem_{op}", v, "byte", name or M.metric_spec(f"smem_bytes_{op}").names[0])
    wf, wf_name = get("ldsm_wavefronts", "roofline.smem.ldsm.wavefronts")
    bc, bc_name = get("ldsm_bank_conflicts", "roofline.smem.ldsm.bank_conflicts")
    add("ldsm_wavefronts", wf, "", wf_name)
    add("ldsm_bank_conflicts", bc, "", bc_name)
    ways = None if wf is None or bc is None or wf - bc <= 0 else wf / (wf - bc)
    add("ldsm_conflict_ways", ways, "", "ldsm_wavefronts / (ldsm_wavefronts - ldsm_bank_conflicts)")
    for level, b in bytes_.items():
        inten = None if flops is None or not b else flops / b
        add(f"intensity_{level}", inten, "FLOP/byte", f"flops / bytes_{level}")
    achieved = None if flops is None or not duration_s else flops / duration_s
    add("achieved_flops_per_second", achieved, "FLOP/s", f"flops / {dur_name}")

    # ceilings ----------------------------------------------------------------------------------
    spec = M.gpu_spec(_str(launch.get("device_name")[0]))
    sm_count, _ = launch.get("sm_count")
    fallback = spec[1] if spec else {}
    fb_name = f"gpus.toml[{spec[0]}]" if spec else None

    def per_sm_fallback(key):
        if key in fallback and sm_count is not None and sm_hz is not None:
            return fallback[key] * float(sm_count) * sm_hz, fb_name
        return None, None

    ceilings = {}
    for path, (counters, section) in M.tensor_op_counters().items():
        vals = [(c, launch.value(c), launch.value(c + ".peak_sustained")) for c in counters]
        used = [(c, p) for c, v, p in vals if v and p]
        avail = [(c, p) for c, _, p in vals if p]
        pick = (used or avail or [None])[0]
        if pick is not None and sm_hz is not None:
            ceilings[f"tensor_{path}"] = (pick[1] * sm_hz, f"{pick[0]}.peak_sustained x {sm_hz_name}")
        else:
            ceilings[f"tensor_{path}"] = per_sm_fallback(f"{'hgmma' if path == 'hgmma' else 'hmma'}_fp16_flop_per_cycle_per_sm")
    for name, canon, weight, key in (
        ("fp32", "ffma_peak_per_cycle", 2, "fp32_flop_per_cycle_per_sm"),
        ("fp16", "hfma_peak_per_cycle", 4, "fp16_flop_per_cycle_per_sm"),
    ):
        v, n = launch.get(canon)
        ceilings[name] = (
            (weight * float(v) * sm_hz, f"{weight} x {n} x {sm_hz_name}")
            if v is not None and sm_hz is not None
            else per_sm_fallback(key)
        )
    for level in NCU_LEVELS:
        peak, pname = launch.get(f"{level}_peak_bytes_per_cycle")
        hz, hname = launch.get(f"{level}_clock_hz")
        if peak is not None and hz is not None:
            ceilings[f"bandwidth_{level}"] = (float(peak) * float(hz), f"{pname} x {hname}")
        elif level == "dram" and "dram_bytes_per_second" in fallback:
            ceilings["bandwidth_dram"] = (fallback["dram_bytes_per_second"], fb_name)
        elif level == "l2" and "l2_bytes_per_cycle" in fallback and sm_hz is not None:
            ceilings["bandwidth_l2"] = (fallback["l2_bytes_per_cycle"] * sm_hz, fb_name)
        elif level == "l1" and "l1_bytes_per_cycle_per_sm" in fallback and sm_count and sm_hz:
            ceilings["bandwidth_l1"] = (fallback["l1_bytes_per_cycle_per_sm"] * float(sm_count) * sm_hz, fb_name)
        else:
            ceilings[f"bandwidth_{level}"] = (None, None)
    l1_hz, l1_hz_name = launch.get("l1_clock_hz")
    smem_hz, smem_hz_name = (l1_hz, l1_hz_name) if l1_hz is not None else (sm_hz, sm_hz_name)
    if "smem_bytes_per_cycle_per_sm" in fallback and sm_count and smem_hz:
        ceilings["bandwidth_smem"] = (
            fallback["smem_bytes_per_cycle_per_sm"] * float(sm_count) * float(smem_hz),
            f"{fb_name}.smem_bytes_per_cycle_per_sm x {launch.get('sm_count')[1]} x {smem_hz_name}",
        )
    else:
        ceilings["bandwidth_smem"] = (None, None)
    for key, (v, src) in ceilings.items():
        unit = "byte/s" if key.startswith("bandwidth") else "FLOP/s"
        add(f"ceiling_{key}", v, unit, src or "")
        if v is None:
            gone.append(missing(f"roofline.ceilings.{key}",
                                "WhowaitsRoofline" if key == "bandwidth_smem" else "SpeedOfLight_HierarchicalTensorRooflineChart"))

    # compute roof of the path actually used: the tensor path carrying the tensor FLOPs (both
    # paths -> FLOP-weighted), plus the FP32/FP16 pipes weighted by their FLOPs.
    compute_roof, roof_src = None, ""
    weighted = [
        (tflops.get("hmma"), ceilings["tensor_hmma"][0], "tensor_hmma"),
        (tflops.get("hgmma"), ceilings["tensor_hgmma"][0], "tensor_hgmma"),
        (fp32, ceilings["fp32"][0], "fp32"),
        (fp16, ceilings["fp16"][0], "fp16"),
    ]
    work = [(f, c, n) for f, c, n in weighted if f]
    if work and all(c for _, c, _ in work):
        # time at roof = sum(flops_i / roof_i); the blended roof = total / that time
        t = sum(f / c for f, c, _ in work)
        compute_roof = sum(f for f, _, _ in work) / t
        roof_src = "FLOP-weighted harmonic blend of " + ", ".join(n for _, _, n in work)
    add("ceiling_compute", compute_roof, "FLOP/s", roof_src)
    for level in LEVELS:
        inten = None if flops is None or not bytes_[level] else flops / bytes_[level]
        bw = ceilings[f"bandwidth_{level}"][0]
        att = None
        if inten is not None and bw is not None and compute_roof is not None:
            att = min(compute_roof, inten * bw)
        add(f"attainable_{level}", att, "FLOP/s", f"min(ceiling_compute, intensity_{level} x ceiling_bandwidth_{level})")
    df = pd.DataFrame(rows, columns=["quantity", "value", "unit", "source"])
    return with_missing(df, _dedup(gone))


def _str(v):
    return v if isinstance(v, str) else None


def _dedup(entries: list[dict]) -> list[dict]:
    seen, out = set(), []
    for e in entries:
        k = (e["field"], e["section"])
        if k not in seen:
            seen.add(k)
            out.append(e)
    return out


# --- launch -------------------------------------------------------------------------------------


def launch_stats(launch) -> pd.DataFrame:
    """Launch shape and occupancy (one row): what a user reads to reverse-engineer a kernel's
    launch configuration.

    Columns: ``grid``, ``block``, ``cluster`` (lists of 3 ints or None; cluster ``[0, 0, 0]``
    = launched without a cluster dimension), ``registers_per_thread`` (Int64),
    ``shared_mem_bytes`` (Int64: static + dynamic shared memory per block),
    ``waves_per_sm`` (float), ``achieved_occupancy_pct`` (float: ``sm__warps_active`` % of peak),
    ``device_name`` (str), ``cc`` (str, e.g. "9.0"), ``sm_count`` (Int64).
    """
    gone = []

    def dims(prefix, field):
        vals = [launch.get(f"{prefix}_{a}")[0] for a in "xyz"]
        if any(v is None for v in vals):
            gone.append(missing(f"launch.{field}", M.metric_spec(f"{prefix}_x").section))
            return None
        return [int(v) for v in vals]

    def one(canon, field, cast):
        v, _ = launch.get(canon)
        if v is None:
            gone.append(missing(field, M.metric_spec(canon).section))
            return None
        return cast(v)

    smem_s = one("shared_mem_static", "launch.shared_mem_bytes", int)
    smem_d = one("shared_mem_dynamic", "launch.shared_mem_bytes", int)
    major = one("cc_major", "device.cc", int)
    minor = one("cc_minor", "device.cc", int)
    row = {
        "grid": [dims("grid", "grid")],
        "block": [dims("block", "block")],
        "cluster": [dims("cluster", "cluster")],
        "registers_per_thread": pd.array([one("registers_per_thread", "launch.registers_per_thread", int)], dtype="Int64"),
        "shared_mem_bytes": pd.array([None if smem_s is None or smem_d is None else smem_s + smem_d], dtype="Int64"),
        "waves_per_sm": [one("waves_per_sm", "launch.waves_per_sm", float)],
        "achieved_occupancy_pct": [one("achieved_occupancy_pct", "launch.achieved_occupancy_pct", float)],
        "device_name": [one("device_name", "device.name", str)],
        "cc": [None if major is None or minor is None else f"{major}.{minor}"],
        "sm_count": pd.array([one("sm_count", "device.sm_count", int)], dtype="Int64"),
    }
    return with_missing(pd.DataFrame(row), _dedup(gone))
