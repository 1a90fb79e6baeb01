"""One launch's whole story as the JSON object of docs/contract.md (``whowaits show --format json``)."""

from __future__ import annotations

import re

from profiler import gcpause
from profiler.analyze import buildcache
from profiler.analyze._common import py
from profiler import metrics as M
from profiler.names import L2_READ_COUNTERS, L2_READ_DERIVED, NO_SECTION
from profiler.schema import Summary, validate_summary
from profiler.analyze.kernel import LEVELS, SMEM_OPS, _dedup, barriers, launch_stats, tensor_util
from profiler.analyze.roofline import compute_pipe, roofline
from profiler.analyze.producers import waits_on
from profiler.analyze.overlap import overlap_json
from profiler.analyze.regions import regions_json
from profiler.analyze.roles import role_edges_json
from profiler.analyze.timeline import brief as timeline_brief
from profiler.analyze.xu import xu_pipe
from profiler.analyze.stalls import (
    opcode_waits,
    short_scoreboard,
    stall_breakdown,
    top_instructions,
    who_waits,
)


CLOCKS = ("sm", "l1", "l2", "dram", "smem")

#: ``MOV Rn, Rn`` (a general register moved onto itself, optionally guarded): ptxas's -G output keeps one for
#: every variable copy (58 of 192 instructions of a 6-line kernel compiled here with nvcc 13.0 -G for sm_90a,
#: none without -G), and an optimised build never emits one: 0 in every committed report (our ladder, cuDNN,
#: FlashAttention-2, cuBLAS, CUTLASS, Triton, the public reports). Uniform-register self-moves (``UMOV UR8,
#: UR8``) do occur in optimised code (v09_wgmma, v13_persistent) and are not counted.
_SELF_MOVE = re.compile(r"^\s*(?:@!?P[0-6T]\s+)?MOV(?:\.\w+)*\s+(R\d+),\s*(R\d+)\s*$")
#: a build is -G when at least this share of its instructions are self-moves (and at least DEBUG_MIN_MOVES)
DEBUG_SELF_MOVE_SHARE = 0.02
DEBUG_MIN_MOVES = 3


def build_signs(texts: list[str]) -> dict:
    """``{debug, self_moves, instructions}`` for SASS ``texts``: ``debug`` when self-moves (``MOV Rn, Rn``)
    make up at least :data:`DEBUG_SELF_MOVE_SHARE` of the instructions (a ``-G`` build); None without SASS."""
    if not texts:
        return {"debug": None, "self_moves": None, "instructions": None}
    n = 0
    for t in texts:
        m = _SELF_MOVE.match(t) if "MOV" in t else None
        if m and m.group(1) == m.group(2):
            n += 1
    return {"debug": n >= DEBUG_MIN_MOVES and n >= DEBUG_SELF_MOVE_SHARE * len(texts), "self_moves": n,
            "instructions": len(texts)}


def _build_signs(launch) -> dict:
    """:func:`build_signs` of the launch's SASS, kept per build (:mod:`.buildcache`)."""
    sass = launch.sass
    if not len(sass):
        return build_signs([])

    def check(d: dict) -> dict:
        if set(d) != {"debug", "self_moves", "instructions"} or d["instructions"] != len(sass):
            raise ValueError("build: not this frame's")
        return dict(d)

    return buildcache.part(launch, "build", lambda: build_signs(sass["sass"].tolist()), check)


def throughput(roofline: dict, duration_ns) -> dict:
    """DRAM and L2 bytes per second over the launch and their % of the peak bandwidth (``roofline`` as the
    summary holds it). None where the bytes or the time are unknown, the % also where the peak is."""
    out: dict = {}
    nbytes = (roofline or {}).get("bytes") or {}
    bws = ((roofline or {}).get("ceilings") or {}).get("bandwidth_bytes_per_s") or {}
    for lv in ("dram", "l2"):
        b = nbytes.get(lv)
        rate = b / (duration_ns * 1e-9) if b is not None and duration_ns else None
        bw = bws.get(lv)
        out[f"{lv}_bytes_per_s"] = rate
        out[f"{lv}_pct_of_peak"] = 100.0 * rate / bw if rate is not None and bw else None
    return out


def _flops_of(q: dict) -> dict:
    return {"tensor": q["flops_tensor"], "fp32": q["flops_fp32"], "fp16": q["flops_fp16"]}


def _tflops(v):
    v = py(v)
    return None if v is None else v / 1e12


def summarize_launch(launch, top: int = 10) -> Summary:
    """The contract object for one launch (:class:`profiler.schema.Summary`); plain JSON-serialisable values.

    Keys: ``report`` (path), ``launch_index`` (index of the launch in the report; also
    ``launch.index``), ``launch_indices`` ([launch_index]), ``kernel`` (demangled), ``duration_ns``,
    ``stall_samples`` {reason: int|null} (every ncu reason, ``warpgroup_arrive`` included,
    ``gmma`` where sampled), ``stall_share`` {reason: float} (sums to 1),
    ``stall_cycles_per_issue`` {reason: float|null}, ``short_scoreboard`` {samples, share,
    cycles_per_issue, by_class: {class: samples}}, ``barriers`` {static: {opcode: count},
    executed: {opcode: count}}, ``tensor_pipe_pct`` (% of the tensor path's own peak), ``xu_pipe_pct`` (the XU
    (MUFU) pipe, % of its peak: ncu's counter), ``xu_pipe_pct_sass`` (the same from the SASS:
    :mod:`profiler.analyze.xu`), ``tensor_roof_pct``
    (achieved tensor FLOP/s, % of the GPU's dense tensor roof, wgmma on Hopper, at the report's clock),
    ``tensor_path`` ("hmma"/"gmma"/"mixed"/
    "none"/null), ``tensor_inst`` {hmma, hgmma}, ``roofline`` {flops, flops_by_path, bytes:
    {l1, l2, dram, smem}, intensity: {l1, l2, dram, smem} (total FLOPs / bytes), achieved_tflops,
    flops_tensor, intensity_tensor: {level} (tensor FLOPs / bytes: ncu's definition),
    achieved_tensor_tflops, compute_pipe (tensor|fp32|fp16: the pipe carrying most FLOPs, whose roof is
    compute_tflops; pipes are never blended), attainable_tflops: {l1, l2, dram, smem} (min(compute roof,
    compute-pipe intensity x bandwidth)), ceilings: {tensor_hmma_tflops, tensor_hgmma_tflops,
    tensor_tflops (the path used), tensor_dense_tflops (the GPU's dense tensor roof), fp32_tflops,
    fp16_tflops, compute_tflops, bandwidth_bytes_per_s: {l1, l2, dram, smem}, clock_hz: {sm, l1, l2,
    dram, smem} (the clock each roof uses: compute roofs the SM clock)}, smem:
    {bytes_by_op: {ld, st, ldsm, stsm, ldgsts, gmma, atom}, ldsm: {wavefronts, bank_conflicts,
    ways}}, l2_reads: {delivered_bytes, multicast_bytes, sectors, requests, miss_sectors, bytes, fanout,
    miss_share, multicast_share} (the L2 read fan-out: :func:`profiler.analyze.roofline.l2_reads`)} (smem = shared memory, ``sm__sass_data_bytes_mem_shared``; null on reports without
    it), ``opcode_waits`` [{class, samples, share, top_reason}] by samples, ``who_waits`` [{class, reason, samples, share, top_opcode,
    top_address, top_sass}] (non-zero cells), ``waits_on`` [{class, opcode, reason, producer_class,
    producer_opcode, samples, share}] (every row), ``waits_on_unresolved`` {reason: samples},
    ``top_instructions`` [{address, offset, sass, class, samples, top_reason, kernel}], ``launch`` {index, grid, block, cluster, registers_per_thread,
    shared_mem_bytes, waves_per_sm, achieved_occupancy_pct}, ``device`` {name, cc, sm_count},
    ``regions`` [{name, source: declared|inferred, stall_samples {reason: int}, samples, share,
    inst_executed, pcs, inherited_samples}] (source regions, :mod:`profiler.analyze.regions`; they sum
    exactly to the kernel's samples, stall samples and executed instructions),
    ``timeline`` {phases [{name, share, duration_ns}], steady_tensor_pct, tail_share, ramp_share,
    duration_ns, interval_ns, activity, curve, missing} (PM sampling, :func:`profiler.analyze.timeline.brief`;
    nulls and its own ``missing`` without it),
    ``overlap`` [{group, address, offset, sass, pending, executed, samples, share, top_reason, commit_offsets,
    overlap_static, overlap_executed, next_offsets, next_pending, next_lower, between_static, between_executed,
    between_work_executed, between_work, collapsed, kernel}] (every wait on a wgmma or cp.async group:
    :mod:`profiler.analyze.overlap`; null, with a ``missing`` entry of section ``none`` and its ``reason``, when
    the SASS commits no such group),
    ``throughput`` {dram_bytes_per_s, l2_bytes_per_s, dram_pct_of_peak, l2_pct_of_peak} (:func:`throughput`),
    ``build`` {debug, self_moves, instructions} (a ``-G`` build flagged from its SASS: :func:`build_signs`),
    ``missing`` [{field, section}]: every null above, with the ncu section that would supply it.
    """
    # The analyses build many short-lived containers and no reference cycles: Python's cyclic collector
    # would scan the frames and parsed SASS of every report in memory several times per summary.
    with gcpause.paused():
        out = validate_summary(_summary(launch, top))
    buildcache.flush(launch)  # the SASS-only parts computed here, for the next report of this build
    return out


def _summary(launch, top: int) -> dict:
    gone: list[dict] = []

    sb = stall_breakdown(launch)
    gone += sb.attrs.get("missing", [])
    stall_samples = {r: py(s) for r, s in zip(sb["reason"], sb["samples"])}
    stall_share = {r: py(s) for r, s in zip(sb["reason"], sb["share"])}
    stall_cpi = {r: py(c) for r, c in zip(sb["reason"], sb["cycles_per_issue"])}

    ww = who_waits(launch)
    gone += ww.attrs.get("missing", [])
    ow = opcode_waits(launch, ww)
    ssc = short_scoreboard(launch, ww)
    ti = top_instructions(launch, n=top)
    wo = waits_on(launch)
    gone += ti.attrs.get("missing", [])

    bar = barriers(launch)
    gone += bar.attrs.get("missing", [])
    tu = tensor_util(launch)
    gone += tu.attrs.get("missing", [])
    rl = roofline(launch)
    gone += rl.attrs.get("missing", [])
    ls = launch_stats(launch)
    gone += ls.attrs.get("missing", [])

    ov, ov_gone = overlap_json(launch)
    gone += ov_gone
    xu, xu_gone = xu_pipe(launch)
    gone += xu_gone

    q = {k: py(v) for k, v in zip(rl["quantity"], rl["value"])}
    duration, _ = launch.get("duration_ns")
    t = tu.iloc[0]
    lrow = ls.iloc[0]
    roofline_json = {
        "flops": q["flops"],
        "flops_by_path": {
            "tensor_hmma": q["flops_tensor_hmma"],
            "tensor_hgmma": q["flops_tensor_hgmma"],
            "fp32": q["flops_fp32"],
            "fp16": q["flops_fp16"],
        },
        "bytes": {lv: q[f"bytes_{lv}"] for lv in LEVELS},
        "intensity": {lv: q[f"intensity_{lv}"] for lv in LEVELS},
        "achieved_tflops": _tflops(q["achieved_flops_per_second"]),
        "flops_tensor": q["flops_tensor"],
        "intensity_tensor": {lv: q[f"intensity_tensor_{lv}"] for lv in LEVELS},
        "achieved_tensor_tflops": _tflops(q["achieved_tensor_flops_per_second"]),
        "compute_pipe": compute_pipe(_flops_of(q), None)[0],
        "attainable_tflops": {lv: _tflops(q[f"attainable_{lv}"]) for lv in LEVELS},
        "ceilings": {
            "tensor_hmma_tflops": _tflops(q["ceiling_tensor_hmma"]),
            "tensor_hgmma_tflops": _tflops(q["ceiling_tensor_hgmma"]),
            "fp32_tflops": _tflops(q["ceiling_fp32"]),
            "fp16_tflops": _tflops(q["ceiling_fp16"]),
            "compute_tflops": _tflops(q["ceiling_compute"]),
            "tensor_tflops": _tflops(q["ceiling_tensor"]),
            "tensor_dense_tflops": _tflops(q["ceiling_tensor_dense"]),
            "bandwidth_bytes_per_s": {lv: q[f"ceiling_bandwidth_{lv}"] for lv in LEVELS},
            "clock_hz": {u: q[f"clock_{u}_hz"] for u in CLOCKS},
        },
        "smem": {
            "bytes_by_op": {op: q[f"bytes_smem_{op}"] for op in SMEM_OPS},
            "ldsm": {"wavefronts": q["ldsm_wavefronts"], "bank_conflicts": q["ldsm_bank_conflicts"],
                     "ways": q["ldsm_conflict_ways"]},
        },
        "l2_reads": {k: q[f"l2_read_{k}"] for k in L2_READ_COUNTERS + L2_READ_DERIVED},
    }
    return {
        "report": launch.report,
        "launch_index": int(launch.index),
        "launch_indices": [int(launch.index)],
        "kernel": launch.kernel,
        "duration_ns": py(duration),
        "stall_samples": stall_samples,
        "stall_share": stall_share,
        "stall_cycles_per_issue": stall_cpi,
        "short_scoreboard": {
            "samples": stall_samples.get("short_scoreboard"),
            "share": stall_share.get("short_scoreboard"),
            "cycles_per_issue": stall_cpi.get("short_scoreboard"),
            "by_class": {c: int(s) for c, s in zip(ssc["opcode_class"], ssc["samples"])},
        },
        "barriers": {
            "static": {o: int(s) for o, s in zip(bar["opcode"], bar["static"])},
            "executed": {o: py(e) for o, e in zip(bar["opcode"], bar["executed"])},
        },
        "tensor_pipe_pct": py(t["tensor_pipe_pct"]),
        "xu_pipe_pct": xu["xu_pipe_pct"],
        "xu_pipe_pct_sass": xu["xu_pipe_pct_sass"],
        "tensor_roof_pct": q["tensor_roof_pct"],
        "tensor_path": t["path"],
        "tensor_inst": {"hmma": py(t["hmma_inst"]), "hgmma": py(t["hgmma_inst"])},
        "roofline": roofline_json,
        "opcode_waits": [
            {"class": c, "samples": int(s), "share": float(sh), "top_reason": r}
            for c, s, sh, r in zip(ow["opcode_class"], ow["samples"], ow["share"], ow["top_reason"])
        ],
        "who_waits": [
            {
                "class": c,
                "reason": r,
                "samples": int(s),
                "share": float(sh),
                "top_opcode": op,
                "top_address": int(a),
                "top_sass": tx,
                "at_exit": int(ax),
            }
            for c, r, s, sh, op, a, tx, ax in zip(
                ww["opcode_class"], ww["reason"], ww["samples"], ww["share"],
                ww["top_opcode"], ww["top_address"], ww["top_sass"], ww["at_exit"],
            )
        ],
        "waits_on": [
            {
                "class": c,
                "opcode": op,
                "reason": r,
                "producer_class": pc,
                "producer_opcode": po,
                "samples": round(float(s), 3),
                "share": float(sh),
            }
            for c, op, r, pc, po, s, sh in zip(
                wo["class"], wo["opcode"], wo["reason"], wo["producer_class"],
                wo["producer_opcode"], wo["samples"], wo["share"],
            )
        ],
        "waits_on_unresolved": {r: round(float(v), 3) for r, v in wo.attrs.get("unresolved", {}).items()},
        "top_instructions": [
            {"address": int(a), "offset": int(o), "sass": tx, "class": c, "samples": int(s), "top_reason": r,
             "kernel": launch.kernel}
            for a, o, tx, c, s, r in zip(
                ti["address"], ti["offset"], ti["sass"], ti["opcode_class"], ti["samples"], ti["top_reason"]
            )
        ],
        "launch": {
            "index": int(launch.index),
            "grid": lrow["grid"],
            "block": lrow["block"],
            "cluster": lrow["cluster"],
            "registers_per_thread": py(lrow["registers_per_thread"]),
            "shared_mem_bytes": py(lrow["shared_mem_bytes"]),
            "waves_per_sm": py(lrow["waves_per_sm"]),
            "achieved_occupancy_pct": py(lrow["achieved_occupancy_pct"]),
        },
        "device": {
            "name": lrow["device_name"],
            "cc": lrow["cc"],
            "sm_count": py(lrow["sm_count"]),
        },
        "regions": regions_json(launch),
        "role_edges": role_edges_json(launch),
        "timeline": timeline_brief(launch),
        "overlap": ov,
        "throughput": throughput(roofline_json, py(duration)),
        "build": _build_signs(launch),
        "missing": _dedup(gone) + _recorded_nan(launch),
    }


#: why a launch whose metrics ncu recorded as NaN has no values: not a section missing from the profile
RECORDED_NAN = ("ncu recorded no values for this launch (every metric empty: the launch did not finish under the profiler, or its "
                "replay failed): re-profile it (the other launches of the report are read as usual)")


def _recorded_nan(launch) -> list[dict]:
    """A ``missing`` entry (field ``launch``, section ``none``, :data:`RECORDED_NAN`) for a launch whose
    duration metric is in the report but NaN, so that the views do not blame its sections."""
    name = M.metric_spec("duration_ns").names[0]
    if launch.has(name) and launch.value(name) is None:
        return [{"field": "launch", "section": NO_SECTION, "reason": RECORDED_NAN}]
    return []


def summarize(path, kernel: str | None = None, top: int = 10) -> list[dict]:
    """:func:`summarize_launch` for every launch of the report at ``path`` whose kernel name
    matches the regex ``kernel`` (all launches for None). Raises ``WhowaitsError`` (one line)
    for a bad path or report, and for a regex that matches nothing."""
    from profiler.report import load_report, select_launches

    report = load_report(path)
    return [summarize_launch(la, top=top) for la in select_launches(report, kernel)]


