"""Barriers, tensor-core utilisation and launch shape of one launch (the roofline: :mod:`.roofline`).

Pure functions of a :class:`~profiler.report.Launch`. Every ncu metric name comes from
``data/metrics.toml`` through canonical names; the formulas are written beside the code.
"""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import dedup as _dedup
from profiler.analyze._common import missing, with_missing
from profiler.analyze.roofline import _tensor_flops, roofline
from profiler.names import LEVELS, SMEM_OPS

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
    reasons, mat = launch.stall_matrix()
    has_exec = "inst_executed" in sass.columns
    executed = sass["inst_executed"].to_numpy() if has_exec else None
    rows = []
    for op, cls, idx in _barrier_groups(launch):
        stalls = mat[idx].sum(axis=0) if mat.shape[1] else np.zeros(0)
        rows.append(
            (
                op,
                cls,
                len(idx),
                int(executed[idx].sum()) if executed is not None else None,
                int(stalls.sum()),
                reasons[int(stalls.argmax())] if stalls.sum() > 0 else None,
            )
        )
    # sort_values' order (executed descending with <NA> last, static descending, opcode; opcodes are
    # unique), without its cost on string columns
    rows.sort(key=lambda r: (r[3] is None, -(r[3] or 0), -r[2], r[0]))
    df = pd.DataFrame(rows, columns=cols)
    df["executed"] = pd.array(df["executed"].tolist(), dtype="Int64")
    gone = [] if has_exec else [missing("barriers.executed", _SOURCE_COUNTERS)]
    return with_missing(df, gone)


def _barrier_groups(launch) -> list[tuple[str, str, np.ndarray]]:
    """(opcode, its class, the slots holding it) of every barrier-type opcode of the SASS, in the order of
    its first slot; kept per build (:mod:`.buildcache`)."""
    sass = launch.sass
    n = len(sass)

    def build() -> list:
        mask = sass["base"].isin(M.barrier_opcodes()).to_numpy()
        at = np.flatnonzero(mask)
        sub = sass[mask]
        return [[str(op), str(sub["opcode_class"].iat[idx[0]]), buildcache.ints(at[idx])]
                for op, idx in sub.groupby("opcode", sort=False).indices.items()]

    def decode(groups: list) -> list[tuple[str, str, np.ndarray]]:
        out = []
        for op, cls, idx in groups:
            k = len(base64.b64decode(idx)) // 4
            ix = buildcache.unints(idx, k)
            if k == 0 or ix.min() < 0 or ix.max() >= n:
                raise ValueError("barrier slots out of range")
            out.append((str(op), str(cls), ix))
        return out

    return buildcache.part(launch, "barriers", build, decode)


# --- tensor cores -------------------------------------------------------------------------------


def _class_executed(launch, cls: str):
    """Executed instructions of an opcode class: per-PC inst_executed summed (SourceCounters),
    else the report's ``sass__inst_executed_per_opcode`` table (InstructionStats)."""
    sass = launch.sass
    if len(sass) and "inst_executed" in sass.columns:
        ex = sass["inst_executed"]
        got = buildcache.codes(launch, "opcode_class") if ex.dtype == np.int64 else None
        if got is not None:  # integer sums: any order gives the same
            names, idx = got
            return int(ex.to_numpy()[idx == names.index(cls)].sum()) if cls in names else 0
        return int(sass.loc[sass["opcode_class"] == cls, "inst_executed"].sum())
    table = launch.instances("sass__inst_executed_per_opcode")
    if table:
        return int(sum(v for op, v in table.items() if M.classify_opcode(op) == cls))
    return None


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


# --- roofline: profiler/analyze/roofline.py (re-exported here) ---------------------------------------


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


__all__ = ["LEVELS", "SMEM_OPS", "barriers", "launch_stats", "roofline", "tensor_util"]
