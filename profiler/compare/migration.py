"""The bottleneck's path across versions: who waits in each version, and where it goes next.

:func:`migration` is a pure function of the versions' summaries in ladder order. It returns the
ladder table (dominant waiter, duration, TFLOPS per version), the stall shares per version, one
generated sentence per step (the same verdict as :func:`profiler.compare.diff.diff` gives for the
pair), and the roofline trajectory: one point per version on the L1, L2, DRAM and shared-memory rooflines,
with the roofs of the tensor paths the versions actually used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.compare import stats
from profiler.names import LEVELS, PATH_COUNTER, is_external
from profiler.compare.diff import debug_notes, diff, no_top_waiter, records, top_waiter, total_samples
from profiler.compare.subjects import same_problem



@dataclass
class Migration:
    """What ``whowaits migration`` shows. Frames:

    - ``table``: version, kernel, duration_ns, tflops (the problem's FLOPs from the sidecar's
      ``problem_flops`` over the duration: comparable across versions; null without a sidecar),
      tflops_counted (FLOPs the counters saw: tensor + FP32 + FP16 instructions, so CUDA-core
      rungs count their exp/scale/max work too), speedup_prev (vs the previous version),
      speedup_first, top_class, top_reason, top_opcode (the opcode most of its samples sit on),
      top_producer (for a scoreboard stall: the base opcode of the instruction most of them wait on,
      e.g. LDSM; None otherwise),
      top_share, top_lo, top_hi (Wilson interval), top_tied_with (the other class·reason cells within noise of
      the top one, comma-separated; None when it stands alone), top_note (why a version has no top waiter: no
      or too few samples, :func:`profiler.compare.diff.no_top_waiter`; None when it has one), top_role_edge / top_role_share (the heaviest edge of
      ``whowaits roles``: waiter —[barrier]→ releaser, and its share of the samples),
      tensor_path, tensor_pipe_pct (% of the path's own peak), xu_pipe_pct (the XU (MUFU) pipe, % of its peak:
      ncu's counter, null where the report lacks it), xu_pipe_pct_sass (the same from the SASS, for every
      version with executed-instruction counts), tensor_roof_pct (% of the GPU's dense
      tensor roof at the report's clock: one scale for every path), compute_roof_tflops (the roof of
      the pipe carrying most FLOPs), ssc_share, dram_pct_of_peak / l2_pct_of_peak (the summary's ``throughput``),
      l2_read_fanout / l2_read_multicast_share (the summary's ``roofline.l2_reads``: SMs served per L2 read for the
      SMs, and the share of the delivered bytes that came by TMA multicast; null without the counters),
      debug_build (a -G build, from its SASS), intensity_l1, intensity_l2, intensity_dram, intensity_smem (total FLOPs / bytes),
      intensity_tensor_<level> (tensor FLOPs / bytes, as ncu's roofline takes them),
      title, change, expected_bottleneck (from the sidecar; empty for external subjects:
      the hypothesis to hold against top_class/top_reason), hypothesis and verdict (from a series
      file), gbps (the problem's bytes over the duration, from a series file or sidecar), step (the sentence
      of the step that led to this version; empty for the first), vs (what speedup_prev and the step compare
      with: the predecessor, or for an external subject the ladder's top rung).
    - ``stall_shares``: version, reason, samples, share, lo, hi (long; every reason sampled anywhere).
    - ``waiters``: version, class, reason, samples, share: the class x reason rows that are the top
      waiter of at least one version, for every version (the path chart).
    - ``steps``: step, src, dst, speedup, top_src, top_dst, moved (bool), sentence, beside (bool: an
      external subject set beside the ladder's top rung ``src``, not a step of the ladder).
    - ``roofline``: version, level, intensity (FLOP/byte), tflops (achieved), path (tensor path),
      intensity_tensor, tflops_tensor (tensor FLOPs only: the point ncu's tensor roofline plots),
      compute_pipe (the pipe whose roof applies).
    - ``regions``: version, region, source (declared | inferred), samples, share (long; the summary's
      ``regions``).
    - ``timelines``: version, x (normalised time, 0..1], series (``tensor_pct``, ``issue_pct``,
      ``warps_<reason>`` as a share of the sampled warp states), value (long; PM sampling, empty for
      versions without it). ``table`` also has ramp_share, steady_share, tail_share, steady_tensor_pct, dip_share.
    - ``roofs``: path, level, intensity, tflops: points of each roof (a bandwidth slope then the
      compute ceiling) for the tensor paths used, from ``roofline.ceilings`` of the summaries
      (:data:`PATH_CEILING`).
    ``path`` is the top waiter per version in order; ``warnings`` the confound guard's findings.
    """

    versions: list
    table: pd.DataFrame
    stall_shares: pd.DataFrame
    waiters: pd.DataFrame
    steps: pd.DataFrame
    roofline: pd.DataFrame
    roofs: pd.DataFrame
    path: list
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    regions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["version", "region", "source", "samples", "share"]))
    timelines: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["version", "x", "series", "value"]))

    TABLES = ("table", "steps", "stall_shares", "waiters", "roofline", "roofs", "regions", "timelines")

    def to_dict(self) -> dict:
        out = {"versions": self.versions, "path": self.path, "warnings": self.warnings, "notes": self.notes}
        for name in self.TABLES:
            out[name] = records(getattr(self, name))
        return out


PATH_CEILING = {path: f"tensor_{counter}_tflops" for path, counter in PATH_COUNTER.items()}
"""Which ceiling of ``roofline.ceilings`` is the roof of each tensor path (other paths:
``compute_tflops``, the analysis' ceiling for the mix of FLOPs the kernel ran)."""


def roof_of(roofline: dict, path: str | None) -> float | None:
    """The compute roof (TFLOPS) for a version's tensor ``path`` from its summary's ``roofline``."""
    ceilings = (roofline or {}).get("ceilings") or {}
    return ceilings.get(PATH_CEILING.get(path or "", ""), None) or ceilings.get("compute_tflops")


def _ceiling_points(roofline: dict, path: str | None, intensity_max: float) -> list[dict]:
    """Roof polylines for one tensor path: per level, from a low intensity up the bandwidth slope
    (``bandwidth_bytes_per_s``) to the ridge point, then flat at the path's peak."""
    ceilings = (roofline or {}).get("ceilings") or {}
    peak = roof_of(roofline, path)
    bws = ceilings.get("bandwidth_bytes_per_s") or {}
    if not peak:
        return []
    out = []
    for lv in LEVELS:
        bw = bws.get(lv)
        if not bw:
            continue
        ridge = peak * 1e12 / bw  # FLOP/byte where bw * I reaches the peak
        lo = ridge / 30
        hi = max(intensity_max * 3, ridge * 10)
        for x in (lo, ridge, hi):
            out.append({"level": lv, "intensity": x, "tflops": min(peak, bw * x / 1e12)})
    return out


def _role_edge(summary: dict) -> str | None:
    """The heaviest role edge of a summary as ``waiter —[barrier]→ releaser`` (None without one)."""
    edges = summary.get("role_edges") or []
    if not edges:
        return None
    e = edges[0]
    return f"{e['waiter']} —[{e['barrier']}]→ {e['releaser']}"


def problem_tflops(problem_flops: float | None, duration_ns: float | None) -> float | None:
    """TFLOP/s of the problem (``problem_flops``, from the report's sidecar: what the call had to compute,
    not what the counters saw) done in ``duration_ns``; None when either is unknown."""
    if not problem_flops or not duration_ns:
        return None
    return float(problem_flops) / float(duration_ns) / 1e3


def _meta(p, info: dict) -> dict:
    """Title, change, expected bottleneck, problem FLOPs of a subject: its sidecar, overridden by ``info``."""
    side = p.sidecar or {}
    out = {k: side.get(k) for k in ("title", "change", "expected_bottleneck", "problem_flops", "problem_bytes")}
    out.update({k: v for k, v in (info.get(p.subject.version or "") or {}).items() if v is not None})
    out.update({k: v for k, v in (p.meta or {}).items() if v})  # a series file's entry comes first
    return out


def problem_rate(meta: dict, duration_ns) -> tuple[float | None, float | None]:
    """(TFLOP/s, GB/s) of one call of the problem over ``duration_ns``: the problem's FLOPs and bytes
    (``meta``: a series file's, else the sidecar's ``problem_flops``/``problem_bytes``). None where
    either is unknown."""
    if not duration_ns or duration_ns != duration_ns:
        return None, None
    nbytes = meta.get("problem_bytes")
    gbps = float(nbytes) / float(duration_ns) if isinstance(nbytes, (int, float)) and nbytes > 0 else None
    return problem_tflops(meta.get("problem_flops"), duration_ns), gbps


def migration(profiled: list, info: dict | None = None, warnings: list | None = None,
              notes: list | None = None, verbose: bool = False) -> Migration:
    """The migration over ``profiled`` (a list of :class:`~profiler.compare.subjects.Profiled`, in
    ladder order; one is enough). Titles, changes, expected bottlenecks and problem FLOPs come from
    each subject's sidecar; ``info`` (version id -> {title, change, …}) overrides them where given, and
    a version's own ``meta`` (from a series file: change, hypothesis, verdict, problem FLOPs/bytes)
    overrides both. What a report lacks is one note per report (:func:`profiler.compare.gaps.gap_line`;
    ``verbose``: every field)."""
    info = info or {}
    labels = [p.label for p in profiled]
    bases = _bases(profiled)
    rows, shares, road, reg_rows, tl_rows = [], [], [], [], []
    first_dur = profiled[0].summary.get("duration_ns") if profiled else None
    tops = []
    for i, p in enumerate(profiled):
        s = p.summary
        base = bases[i]
        prev = (profiled[base].summary.get("duration_ns")
                if base is not None and same_problem(profiled[base], p) else None)
        first_same = same_problem(profiled[0], p)
        n = total_samples(s)
        top = top_waiter(s)
        tops.append(top)
        roof = s.get("roofline") or {}
        inten = roof.get("intensity") or {}
        dur = s.get("duration_ns")
        lo = hi = None
        if top and n:
            lo_a, hi_a = stats.wilson_interval(top["samples"], n)
            lo, hi = float(lo_a), float(hi_a)
        ssc = (s.get("short_scoreboard") or {}).get("samples")
        meta = _meta(p, info)
        tflops, gbps = problem_rate(meta, dur)
        rows.append({
            "version": p.label, "kernel": s.get("kernel"), "duration_ns": dur,
            "tflops": tflops, "gbps": gbps, "tflops_counted": roof.get("achieved_tflops"),
            "speedup_prev": stats.duration_change(prev, dur)["speedup"] if prev else None,
            "vs": profiled[bases[i]].label if bases[i] is not None else None,
            "speedup_first": stats.duration_change(first_dur, dur)["speedup"] if first_dur and first_same else None,
            "top_class": top["class"] if top else None, "top_reason": top["reason"] if top else None,
            "top_opcode": top.get("opcode") if top else None,
            "top_producer": top.get("producer") if top else None,
            "top_share": top["share"] if top else None, "top_lo": lo, "top_hi": hi,
            "top_tied_with": ", ".join(top["tied_with"]) if top and top.get("tied_with") else None,
            "top_note": no_top_waiter(s),
            "top_role_edge": _role_edge(s), "top_role_share": ((s.get("role_edges") or [{}])[0].get("share")),
            "tensor_path": s.get("tensor_path"), "tensor_pipe_pct": s.get("tensor_pipe_pct"),
            "xu_pipe_pct": s.get("xu_pipe_pct"), "xu_pipe_pct_sass": s.get("xu_pipe_pct_sass"),
            "tensor_roof_pct": s.get("tensor_roof_pct"),
            "compute_roof_tflops": ((roof.get("ceilings") or {}).get("compute_tflops")),
            "ssc_share": (ssc / n if ssc is not None and n else None),
            "dram_pct_of_peak": (s.get("throughput") or {}).get("dram_pct_of_peak"),
            "l2_pct_of_peak": (s.get("throughput") or {}).get("l2_pct_of_peak"),
            "l2_read_fanout": (roof.get("l2_reads") or {}).get("fanout"),
            "l2_read_multicast_share": (roof.get("l2_reads") or {}).get("multicast_share"),
            "debug_build": (s.get("build") or {}).get("debug"),
            **{f"intensity_{lv}": inten.get(lv) for lv in LEVELS},
            **{f"intensity_tensor_{lv}": (roof.get("intensity_tensor") or {}).get(lv) for lv in LEVELS},
            "title": meta.get("title") or "", "change": meta.get("change") or "",
            "expected_bottleneck": meta.get("expected_bottleneck") or "",
            **_phase_columns(s.get("timeline")),
            "hypothesis": meta.get("hypothesis") or "", "verdict": meta.get("verdict") or "",
        })
        for r in s.get("regions") or []:
            reg_rows.append({"version": p.label, "region": r["name"], "source": r["source"],
                             "samples": r.get("samples"), "share": r.get("share")})
        curve = (s.get("timeline") or {}).get("curve") or {}
        for series in ("tensor_pct", "issue_pct"):
            for x, v in zip(curve.get("x") or [], curve.get(series) or []):
                tl_rows.append({"version": p.label, "x": x, "series": series, "value": v})
        for reason, values in (curve.get("warps") or {}).items():
            for x, v in zip(curve.get("x") or [], values):
                tl_rows.append({"version": p.label, "x": x, "series": f"warps_{reason}", "value": v})
        samples = s.get("stall_samples") or {}
        if n:
            reasons = [r for r, v in samples.items() if v is not None]  # a reason the chip lacks is absent
            k = np.array([samples[r] or 0 for r in reasons], dtype=float)
            lo_r, hi_r = stats.wilson_interval(k, n)
            for r, kk, l, h in zip(reasons, k, lo_r, hi_r):
                shares.append({"version": p.label, "reason": r, "samples": int(kk), "share": kk / n,
                               "lo": float(l), "hi": float(h)})
        for lv in LEVELS:
            road.append({"version": p.label, "level": lv, "intensity": inten.get(lv),
                         "tflops": roof.get("achieved_tflops"), "path": s.get("tensor_path"),
                         "intensity_tensor": (roof.get("intensity_tensor") or {}).get(lv),
                         "tflops_tensor": roof.get("achieved_tensor_tflops"),
                         "compute_pipe": roof.get("compute_pipe")})

    stall_shares = pd.DataFrame(shares, columns=["version", "reason", "samples", "share", "lo", "hi"])
    if len(stall_shares):  # every reason appears for every version (0 where unsampled), fixed order
        order = (stall_shares.groupby("reason")["share"].max().sort_values(ascending=False).index.tolist())
        full = pd.MultiIndex.from_product([[lb for lb in labels if lb in set(stall_shares["version"])], order],
                                          names=["version", "reason"])
        stall_shares = (stall_shares.set_index(["version", "reason"]).reindex(full).reset_index())
        stall_shares["samples"] = stall_shares["samples"].fillna(0).astype(int)
        stall_shares["share"] = stall_shares["share"].fillna(0.0)

    keyset = list(dict.fromkeys((t["class"], t["reason"]) for t in tops if t))
    wrows = []
    for p in profiled:
        n = total_samples(p.summary)
        got = {(w["class"], w["reason"]): w.get("samples") or 0 for w in p.summary.get("who_waits") or []}
        for c, r in keyset:
            wrows.append({"version": p.label, "class": c, "reason": r, "samples": int(got.get((c, r), 0)),
                          "share": got.get((c, r), 0) / n if n else None})
    waiters = pd.DataFrame(wrows, columns=["version", "class", "reason", "samples", "share"])

    srows = []
    for i in range(1, len(profiled)):
        pa, pb = profiled[bases[i]], profiled[i]
        d = diff(pa.summary, pb.summary, pa.label, pb.label, same_kernel=same_problem(pa, pb))
        ta, tb = d.top_a, d.top_b
        moved = bool(ta and tb and (ta["class"], ta["reason"]) != (tb["class"], tb["reason"]))
        srows.append({"step": i, "src": pa.label, "dst": pb.label, "speedup": d.speedup,
                      "top_src": f"{ta['class']}·{ta['reason']}" if ta else None,
                      "top_dst": f"{tb['class']}·{tb['reason']}" if tb else None,
                      "moved": moved, "sentence": d.verdict, "beside": _external(pb) and not _external(pa)})
    steps = pd.DataFrame(srows, columns=["step", "src", "dst", "speedup", "top_src", "top_dst", "moved", "sentence",
                                         "beside"])

    roofline = pd.DataFrame(road, columns=["version", "level", "intensity", "tflops", "path", "intensity_tensor",
                                           "tflops_tensor", "compute_pipe"])
    imax = pd.to_numeric(roofline["intensity"], errors="coerce").max() if len(roofline) else np.nan
    imax = float(imax) if imax == imax else 1000.0
    roof_rows, seen = [], set()
    for p in profiled:
        r = p.summary.get("roofline") or {}
        path = p.summary.get("tensor_path")
        if path in seen:
            continue
        seen.add(path)
        for pt in _ceiling_points(r, path, imax):
            roof_rows.append({"path": path, **pt})
    roofs = pd.DataFrame(roof_rows, columns=["path", "level", "intensity", "tflops"])
    from profiler.compare.gaps import gap_lines  # noqa: PLC0415

    notes = (list(notes or []) + [n for p in profiled for n in (p.meta or {}).get("left_out", [])]
             + gap_lines([(p.label, p.summary) for p in profiled], verbose=verbose)
             + debug_notes([(p.label, p.summary) for p in profiled]))
    table = _no_nan_text(pd.DataFrame(rows))
    table["step"] = [""] + list(steps["sentence"])
    return Migration(versions=labels, table=table, stall_shares=stall_shares, waiters=waiters,
                     steps=steps, roofline=roofline, roofs=roofs,
                     path=[{"version": lb, **(t or {})} for lb, t in zip(labels, tops)],
                     warnings=list(warnings or []), notes=notes,
                     regions=pd.DataFrame(reg_rows, columns=["version", "region", "source", "samples", "share"]),
                     timelines=pd.DataFrame(tl_rows, columns=["version", "x", "series", "value"]))


def _no_nan_text(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns with None where a value is unknown, never a float NaN (which every format would print as
    ``nan``: a version without samples has no top waiter)."""
    for c in df.columns:
        if df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype):
            df[c] = pd.Series([None if isinstance(v, float) and v != v else v for v in df[c]], index=df.index,
                              dtype=object)
    return df


def _external(p) -> bool:
    return is_external(p.label) or is_external(getattr(p.subject, "version", None))


def _bases(profiled: list) -> list[int | None]:
    """What each subject is measured against (an index, None for the first): its predecessor, except an
    external subject (``ext-*``: cuDNN, FlashAttention-2, any ``--cmd`` program), which is set beside the
    ladder's top rung (the last of our versions before it), not chained after another external one;
    without any rung of ours before it, its predecessor."""
    out: list[int | None] = []
    top = None
    for i, p in enumerate(profiled):
        if i == 0:
            out.append(None)
        elif _external(p) and top is not None:
            out.append(top)
        else:
            out.append(i - 1)
        if not _external(p):
            top = i
    return out


def _phase_columns(tl: dict | None) -> dict:
    """ramp_share, steady_share, tail_share, steady_tensor_pct, dip_share of a summary's ``timeline`` (None
    without; dip_share None in summaries made before dips)."""
    phases = {p["name"]: p["share"] for p in ((tl or {}).get("phases") or [])}
    return {"ramp_share": phases.get("ramp"), "steady_share": phases.get("steady"),
            "tail_share": phases.get("tail"), "steady_tensor_pct": (tl or {}).get("steady_tensor_pct"),
            "dip_share": (tl or {}).get("dip_share")}
