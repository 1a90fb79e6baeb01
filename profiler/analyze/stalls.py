"""Where warps wait: stall breakdown, who waits on whom (opcode class x reason), top
instructions, and short-scoreboard (SSC) stalls. Pure functions of a :class:`~profiler.report.Launch`.

Sample counts are ncu's PC-sampling counts (``smsp__pcsamp_warps_issue_stalled_<reason>``);
kernel-level totals are the metrics' own values, per-PC ones their instances (which sum to the
totals). Cycles per issued instruction are the kernel-level
``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`` (WarpStateStats).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import group_sum, missing, with_missing


def stall_breakdown(launch) -> pd.DataFrame:
    """Stall samples, share and warp cycles per issued instruction for every ncu stall reason.

    One row per reason of ``metrics.stall_reasons()`` (metrics.toml's order, ``warpgroup_arrive``
    included); ``gmma`` only when the report samples it; then any other reason the chip's
    sampler reports (``metrics.sampled_reasons``).

    Columns:
      ``reason`` (str); ``samples`` (Int64: ``smsp__pcsamp_warps_issue_stalled_<reason>``, <NA>
      when the report lacks it); ``not_issued`` (Int64: the ``_not_issued`` variant);
      ``share`` (float: samples / all stall samples, sums to 1; NaN when samples are missing);
      ``cycles_per_issue`` (float: ``smsp__average_warps_issue_stalled_<r>_per_issue_active.ratio``
      with gh100's aliases ``gmma`` for warpgroup_arrive, ``no_instruction`` for no_instructions;
      NaN when absent); ``ratio_metric`` (str: that ratio's ncu name).
    ``attrs["missing"]``: [{field, section}] for absent values.
    """
    cfg = M.stall_config()
    rows, gone = [], []
    sampled = M.sampled_reasons(launch.metrics["metric"].unique())
    reasons = list(M.stall_reasons()) + [r for r in sampled if r not in M.stall_reasons()]
    for reason in reasons:
        name = cfg["sample_prefix"] + reason
        samples = launch.value(name)
        not_issued = launch.value(name + cfg["not_issued_suffix"])
        ratio_name = M.cycles_per_issue_metric(reason)
        ratio = launch.value(ratio_name)
        if reason == "gmma" and samples is None:
            continue  # only some chips sample gmma; gh100 samples wgmma waits as warpgroup_arrive
        if samples is None:
            section = cfg["section"]
            if sampled:  # the sampler ran, but this chip/ncu has no such reason
                section += " (not a stall reason of this GPU's sampler)"
            gone.append(missing(f"stall_samples.{reason}", section))
        if ratio is None:
            gone.append(missing(f"stall_cycles_per_issue.{reason}", cfg["section"]))
        rows.append((reason, samples, not_issued, ratio, ratio_name))
    df = pd.DataFrame(rows, columns=["reason", "samples", "not_issued", "cycles_per_issue", "ratio_metric"])
    for col in ("samples", "not_issued"):
        df[col] = pd.array([None if pd.isna(v) else int(v) for v in df[col]], dtype="Int64")
    df["cycles_per_issue"] = df["cycles_per_issue"].astype("float64")
    total = df["samples"].sum(skipna=True)
    df.insert(3, "share", (df["samples"].astype("float64") / total) if total else np.nan)
    return with_missing(df, gone)


def exit_tail(sass: pd.DataFrame) -> np.ndarray:
    """Per PC of ``sass`` (address order): whether it lies on the kernel's exit path, the run of instructions that
    ends in an unpredicated EXIT and holds only ``[exit_tail]`` opcodes of ``data/opcode_classes.toml`` (fences, a
    cluster's or a CTA's last barrier, CCTL, WARPSYNC, NOP). A warp sampled there has no work left and waits for the
    others before it may leave (a cluster kernel's spare producer warps, for the whole kernel); a branch, a store or
    any other work ends the run going back. The SASS text's ``@P`` guard marks a predicated instruction."""
    n = len(sass)
    mask = np.zeros(n, dtype=bool)
    if not n:
        return mask
    allowed = M.exit_tail_opcodes()
    text = sass["sass"].to_numpy(dtype=object)
    base = (sass["base"].tolist() if "base" in sass.columns
            else [str(o).split(".", 1)[0] for o in sass["opcode"].to_numpy(dtype=object)])
    for i in range(n):
        if base[i] != "EXIT" or str(text[i]).lstrip().startswith("@"):
            continue
        j = i
        while j >= 0 and base[j] in allowed and not mask[j]:
            mask[j] = True
            j -= 1
    return mask


def exit_tail_of(launch) -> np.ndarray:
    """:func:`exit_tail` of the launch's SASS, kept with its build's analyses (who_waits and the source regions both
    read it)."""
    n = len(launch.sass)

    def decode(s: str) -> np.ndarray:
        if not isinstance(s, str):  # a damaged entry: dropped and rebuilt (buildcache.part)
            raise TypeError("exit_tail: not a bitmap string")
        mask = np.zeros(n, dtype=bool)
        mask[buildcache.unbits(s, n)] = True
        return mask

    return buildcache.part(launch, "exit_tail", lambda: buildcache.bits(np.flatnonzero(exit_tail(launch.sass)), n),
                           decode)


def who_waits(launch) -> pd.DataFrame:
    """Who waits on whom: stall samples per opcode class x reason, non-zero cells only, sorted by
    samples (descending).

    Columns:
      ``opcode_class`` (str); ``reason`` (str); ``samples`` (int64: sampled warps stalled for
      ``reason`` at instructions of that class); ``share`` (float: of all stall samples);
      ``top_opcode`` (str: the opcode with modifiers carrying most of the cell's samples — e.g.
      a ``barrier`` stall on ``WARPGROUP.DEPBAR.LE`` is a wgmma wait, on ``BAR.SYNC`` a CTA
      barrier); ``top_address`` (uint64: the PC of the single instruction carrying most of the
      cell's samples); ``top_sass`` (str: its SASS text); ``at_exit`` (int64: of the cell's samples, those on
      the kernel's exit path, :func:`exit_tail`: warps with no work left).
    ``attrs["missing"]`` names SourceCounters when the report has no per-PC samples.
    """
    sass = launch.sass
    reasons, mat = launch.stall_matrix()
    cols = ["opcode_class", "reason", "samples", "share", "top_opcode", "top_address", "top_sass", "at_exit"]
    if mat.shape[1] == 0 or len(sass) == 0:
        return with_missing(
            pd.DataFrame(columns=cols), [missing("who_waits", M.stall_config()["per_pc_section"])]
        )
    total = int(mat.sum())
    # np.unique of the columns, kept per build
    classes, cls_idx = (buildcache.codes(launch, "opcode_class")
                        or np.unique(sass["opcode_class"].to_numpy(dtype=object), return_inverse=True))
    opcodes, op_idx = (buildcache.codes(launch, "opcode")
                       or np.unique(sass["opcode"].to_numpy(dtype=object), return_inverse=True))
    cells = group_sum(cls_idx, mat, len(classes))
    tail = exit_tail_of(launch)
    at_exit = group_sum(cls_idx[tail], mat[tail], len(classes)) if tail.any() else np.zeros_like(cells)
    by_op = group_sum(op_idx, mat, len(opcodes))
    op_class = np.zeros(len(opcodes), dtype=np.int64)
    op_class[op_idx] = cls_idx
    address = sass["address"].to_numpy()
    text = sass["sass"].to_numpy(dtype=object)
    rows = []
    # per class, for every reason at once: the first PC (address order) and the first opcode (sorted order)
    # carrying the most samples; a class has samples in every cell visited, so its maxima are its own
    tops: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for c, j in zip(*np.nonzero(cells)):
        got = tops.get(c)
        if got is None:
            pcs_c = np.flatnonzero(cls_idx == c)
            ops_c = np.flatnonzero(op_class == c)
            got = tops[c] = (pcs_c[np.argmax(mat[pcs_c], axis=0)], ops_c[np.argmax(by_op[ops_c], axis=0)])
        top_pc = int(got[0][j])
        n = int(cells[c, j])
        rows.append(
            (classes[c], reasons[j], n, n / total, opcodes[int(got[1][j])],
             np.uint64(address[top_pc]), text[top_pc], int(at_exit[c, j]))
        )
    # sorted here, not by DataFrame.sort_values (~1.5 ms on string columns of ~60 rows): the keys
    # (class, reason) are unique, so the order is the same
    rows.sort(key=lambda r: (-r[2], r[0], r[1]))
    df = pd.DataFrame(rows, columns=cols)
    df["samples"] = df["samples"].astype(np.int64)
    df["top_address"] = df["top_address"].astype(np.uint64)
    df["at_exit"] = df["at_exit"].astype(np.int64)
    return with_missing(df, [])


def opcode_waits(launch, _who_waits: pd.DataFrame | None = None) -> pd.DataFrame:
    """Stall samples per opcode class, sorted by samples (descending); classes with none omitted.

    Columns: ``opcode_class`` (str), ``samples`` (int64), ``share`` (float: of all stall
    samples), ``top_reason`` (str: the reason with most of the class's samples),
    ``top_reason_samples`` (int64).
    """
    ww = who_waits(launch) if _who_waits is None else _who_waits
    cols = ["opcode_class", "samples", "share", "top_reason", "top_reason_samples"]
    if ww.empty:
        return with_missing(pd.DataFrame(columns=cols), ww.attrs.get("missing", []))
    total = int(ww["samples"].sum())
    agg: dict[str, int] = {}
    top: dict[str, tuple[str, int]] = {}
    # ww is sorted by samples descending: the first cell seen of a class is its top reason
    for cls, reason, n in zip(ww["opcode_class"], ww["reason"], ww["samples"]):
        agg[cls] = agg.get(cls, 0) + int(n)
        top.setdefault(cls, (reason, int(n)))
    order = sorted(agg, key=lambda c: (-agg[c], c))  # classes are unique: sort_values' order
    df = pd.DataFrame(
        {
            "opcode_class": order,
            "samples": np.array([agg[c] for c in order], dtype=np.int64),
            "share": np.array([agg[c] for c in order], dtype=np.float64) / total,
            "top_reason": [top[c][0] for c in order],
            "top_reason_samples": np.array([top[c][1] for c in order], dtype=np.int64),
        }
    )
    return with_missing(df, [])


def top_instructions(launch, n: int = 10) -> pd.DataFrame:
    """The ``n`` instructions with the most stall samples (descending), for reading the SASS.

    Columns: ``address`` (uint64 PC), ``offset`` (int64, from the function start), ``sass``
    (str), ``opcode_class`` (str), ``samples`` (int64: all stall samples at the PC), ``share``
    (float: of all stall samples), ``top_reason`` (str), ``top_reason_samples`` (int64),
    ``inst_executed`` (Int64: warp-level executions; <NA> without SourceCounters).
    """
    sass = launch.sass
    reasons, mat = launch.stall_matrix()
    cols = [
        "address", "offset", "sass", "opcode_class", "samples", "share",
        "top_reason", "top_reason_samples", "inst_executed",
    ]
    if mat.shape[1] == 0 or len(sass) == 0:
        return with_missing(
            pd.DataFrame(columns=cols), [missing("top_instructions", M.stall_config()["per_pc_section"])]
        )
    per_pc = mat.sum(axis=1)
    total = per_pc.sum()
    order = np.argsort(-per_pc, kind="stable")[: max(int(n), 0)]
    order = order[per_pc[order] > 0]
    top_j = mat[order].argmax(axis=1) if len(order) else np.array([], dtype=int)
    executed = (
        pd.array(sass["inst_executed"].to_numpy()[order], dtype="Int64")
        if "inst_executed" in sass.columns
        else pd.array([pd.NA] * len(order), dtype="Int64")
    )
    df = pd.DataFrame(
        {
            "address": sass["address"].to_numpy()[order],
            "offset": sass["offset"].to_numpy()[order],
            "sass": sass["sass"].to_numpy()[order],
            "opcode_class": sass["opcode_class"].to_numpy()[order],
            "samples": per_pc[order].astype(np.int64),
            "share": per_pc[order] / total if total else np.nan,
            "top_reason": [reasons[j] for j in top_j],
            "top_reason_samples": mat[order, top_j].astype(np.int64) if len(order) else [],
            "inst_executed": executed,
        }
    )
    return with_missing(df, [])


def short_scoreboard(launch, _who_waits: pd.DataFrame | None = None) -> pd.DataFrame:
    """Short-scoreboard (SSC) stall samples by the opcode class of the waiting instruction:
    who waits on an MIO result (shared memory, LDSM, SHFL, MUFU, …). Sorted by samples.

    Kernel totals (samples, share, cycles per issue) are the ``short_scoreboard`` row of
    :func:`stall_breakdown`.

    Columns: ``opcode_class`` (str), ``samples`` (int64), ``share`` (float: of all SSC samples),
    ``top_opcode`` (str: opcode with modifiers carrying most of the class's SSC samples),
    ``top_address`` (uint64), ``top_sass`` (str).
    """
    ww = who_waits(launch) if _who_waits is None else _who_waits
    cols = ["opcode_class", "samples", "share", "top_opcode", "top_address", "top_sass"]
    if ww.empty:
        return with_missing(pd.DataFrame(columns=cols), ww.attrs.get("missing", []))
    ssc = ww[ww["reason"] == "short_scoreboard"].copy()
    total = ssc["samples"].sum()
    ssc["share"] = ssc["samples"] / total if total else np.nan
    return with_missing(ssc[cols].reset_index(drop=True), [])
