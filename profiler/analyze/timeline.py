"""When inside the kernel: PM-sampled time series, and the ramp-up / steady state / tail found in them.

Input: ``Launch.timeline`` (the PM samples as ncu_report aligns them, see :mod:`profiler.report`).
Which ncu metric feeds which series is data (``[timeline]`` of ``data/metrics.toml``):
``tensor_pct``, ``issue_pct`` (% of peak), ``ipc``, ``dram_pct``, ``l2_pct``, ``ctas_launched``,
``sm_active_cycles`` and ``warps_<reason>`` (warps stalled on ``<reason>`` per sample, from the
warp-state section).

Time. ncu samples each pass group in a replay pass of its own; ``aligned_metric`` gives each sample
a GPU time stamp (absolute, or from the workload start in older reports). Every series is put on the
time of its own pass: t = stamp - the pass's first stamp (its workload start). The kernel's window is
the run of samples in which the SMs were active (``sm_active_cycles`` > 0; else any activity): a
sample covers the interval that ends at its stamp, so the window runs from the stamp before the first
active sample to the last active one, and ``t_ns`` counts from that start. Series of other passes are
read at the same times from their own window (nearest sample after aligning their starts).

Phases, from the activity series A (tensor-pipe % of peak when the kernel uses the tensor pipe, i.e.
its peak sample reaches ``TENSOR_USED_PCT`` and, where the report counts executed instructions, it executes
MMA instructions (ncu's tensor-pipe counter reads a few % on Hopper for kernels that execute none); else
instruction issue %), smoothed over 3 samples
(PM intervals alias with the main loop and alternate high/low): the steady level L is the median of
the smoothed A over the window; **ramp** = the samples before the first one reaching
``STEADY_FRACTION`` x L, **tail** = the samples after the last one reaching it, **steady** = between.
Shares are of the window's duration; ``steady_tensor_pct`` is the mean (unsmoothed) tensor-pipe % over
the steady samples; ``tail_share`` the tail's share. The resolution is one PM interval (about 1.5 us on
the H200: ~1.5% of a 100 us kernel).

Dips, inside the steady state: the runs of samples whose smoothed activity falls under ``DIP_FRACTION`` x the
level around them (the rolling median of ``DIP_WINDOW`` steady samples: a drop longer than half of it is a
level of its own, such as a partial last round) — a persistent kernel's tile boundaries, a burst of loads
or stores that stalls every SM at once — widened by one sample on each side (the smoothing spreads a one-sample dip over three); a run on the steady phase's
first or last sample is the ramp's or the tail's edge, not a dip. A dip's ``level`` is the median
activity of the calm steady samples around it (``DIP_BASELINE_SAMPLES`` on each side; L without any), and a
run none of whose samples falls under ``DIP_FRACTION`` x that level is the smoothing's echo of the ramp or
the tail, not a dip. ``deficit_ns`` is the activity the dip lost, in time at its level: the sum over its
samples of max(0, level - A) / level x the interval; its ``share`` is that over the window. ``rose`` names the series that rose in it: each one's mean over the
dip's samples against its median over the rest of the steady state, from ``DIP_RISE`` x on (a DRAM burst, more
warps waiting on a scoreboard). From ``DIP_PERIOD_MIN`` dips on, ``dip_period_ns`` is the median spacing of
their centres: dips at a steady period are the kernel's rounds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profiler import metrics as M

#: a sample must reach this fraction of the steady level to count as steady (ramp before, tail after)
STEADY_FRACTION = 0.8
#: the tensor pipe defines the phases when its peak sample reaches this % (else instruction issue)
TENSOR_USED_PCT = 5.0
#: samples smoothed over (centred moving mean) before the thresholds are applied
SMOOTH = 3

PHASES = ("ramp", "steady", "tail")
#: a phase share must change by more than this many PM intervals (of the kernel's duration) to count
PHASE_NOISE_INTERVALS = 2
#: phases need this many PM samples inside the launch: a boundary is known to one interval, so each share
#: is uncertain by 1/n of the kernel's time; from 20 samples on that is at most 5%, the run-to-run band of a
#: duration (profiler.compare.stats.DURATION_NOISE). Fewer (a 10 µs kernel sampled every ~1.5 µs has ~7) give
#: no phases, and the timeline says why; the curve itself is kept.
MIN_PM_SAMPLES = 20
#: a steady-state sample whose smoothed activity is under this fraction of the level around it is in a dip
DIP_FRACTION = 0.9
#: the level around a sample: the rolling median of this many steady samples centred on it, so that a drop of up
#: to half of it (4 samples, ~6 us on the H200) is a dip and a longer one (a partial last round) a level of its own
DIP_WINDOW = 9
#: another series "rose" in a dip from this ratio of its dip mean to its steady median on
DIP_RISE = 1.25
#: the most risers listed per dip (highest ratio first)
DIP_RISERS = 4
#: dips needed for a period
DIP_PERIOD_MIN = 3
#: a dip's own level: the median activity of the calm steady samples this close before and after it
DIP_BASELINE_SAMPLES = 3


def _missing(field: str, section: str) -> dict:
    return {"field": field, "section": section}


def _per_pass(tf: pd.DataFrame, names) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Metric -> (t from its pass's first sample, values), sorted by time, for the metrics ``names``."""
    metric = tf["metric"].to_numpy(dtype=object)
    t_all = tf["t_ns"].to_numpy(dtype=np.int64)
    v_all = tf["value"].to_numpy(dtype=np.float64)
    order = np.argsort(metric, kind="stable")
    m_sorted = metric[order]
    bounds = np.flatnonzero(m_sorted[1:] != m_sorted[:-1]) + 1
    out = {}
    wanted = set(names)
    for idx in np.split(order, bounds):
        name = metric[idx[0]]
        if name not in wanted:
            continue
        t, v = t_all[idx], v_all[idx]
        o = np.argsort(t, kind="stable")
        out[name] = (t[o] - t[o][0], v[o])
    return out


def _window(active: np.ndarray) -> tuple[int, int] | None:
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return None
    return int(idx[0]), int(idx[-1])


def _smooth(v: np.ndarray) -> np.ndarray:
    return pd.Series(v).rolling(SMOOTH, center=True, min_periods=1).mean().to_numpy()


def series_map(launch) -> dict[str, str]:
    """Series name -> ncu metric name for the PM-sampled metrics this launch holds."""
    tf = launch.timeline
    return M.timeline_series(tf["metric"].unique()) if len(tf) else {}


def timeline(launch) -> dict:
    """The timeline of one launch as docs/contract.md gives it (plain JSON values).

    Keys: ``report``, ``launch_index``, ``kernel``, ``t_ns`` [int] (sample times from the kernel's
    start; each sample covers the interval ending there), ``interval_ns`` (median spacing),
    ``duration_ns`` (the window: ``t_ns[-1]``), ``series`` {series: [float]} (one value per ``t_ns``),
    ``sources`` {series: ncu metric}, ``activity`` (the series the phases come from), ``steady_level``,
    ``phases`` [{name, start_ns, end_ns, duration_ns, share, samples}], ``steady_tensor_pct``,
    ``tail_share``, ``ramp_share``, ``dips`` [{start_ns, end_ns, samples, level, min_pct, deficit_ns, share, rose
    {series: ratio}}], ``dip_share``, ``dip_period_ns``, ``missing`` [{field, section}]. Without PM sampling
    every value is null and ``missing`` names the section.
    """
    cfg = M.timeline_config()
    out = {"report": launch.report, "launch_index": int(launch.index), "kernel": launch.kernel,
           "t_ns": None, "interval_ns": None, "duration_ns": None, "series": None, "sources": None,
           "activity": None, "steady_level": None, "phases": None, "steady_tensor_pct": None,
           "tail_share": None, "ramp_share": None, "dips": None, "dip_share": None, "dip_period_ns": None,
           "missing": []}
    smap = series_map(launch)
    base = [s for s in smap if not s.startswith("warps_")]
    if not base:
        out["missing"] = [_missing(f, cfg["section"]) for f in
                          ("t_ns", "series", "phases", "steady_tensor_pct", "tail_share")]
        return out
    if not any(s.startswith("warps_") for s in smap):
        out["missing"].append(_missing("series.warps_<reason>", cfg["warp_state_section"]))
    tf = launch.timeline
    primary = next(s for s in ("sm_active_cycles", "tensor_pct", "issue_pct", *base) if s in smap)
    by_metric = _per_pass(tf, smap.values())
    t_all, v_primary = by_metric[smap[primary]]
    raw = {s: by_metric[smap[s]] for s in smap}
    active = v_primary > 0
    if primary != "sm_active_cycles":
        active = np.zeros_like(active)
        for s in base:
            t_s, v_s = raw[s]
            active |= np.interp(t_all, t_s, v_s, left=0, right=0) > 0
    win = _window(active)
    if win is None:
        out["missing"] = [_missing("phases", cfg["section"])]
        return out
    a, b = win
    interval = float(np.median(np.diff(t_all))) if len(t_all) > 1 else 0.0
    t0 = t_all[a - 1] if a > 0 else t_all[a] - interval
    t = t_all[a:b + 1] - t0
    series: dict[str, list[float]] = {}
    for s, (t_s, v_s) in raw.items():
        if s.startswith("warps_") or len(t_s) != len(t_all) or not np.array_equal(t_s, t_all):
            series[s] = _other_pass(t_s, v_s, t)
        else:
            series[s] = [float(x) for x in v_s[a:b + 1]]
    tensor = np.array(series.get("tensor_pct", []), dtype=float)
    use_tensor = tensor.size and float(tensor.max()) >= TENSOR_USED_PCT and mma_executed(launch) != 0
    activity = "tensor_pct" if use_tensor else ("issue_pct" if "issue_pct" in series else primary)
    sm = _smooth(np.array(series[activity], dtype=float))
    level = float(np.median(sm))
    above = np.flatnonzero(sm >= STEADY_FRACTION * level) if level > 0 else np.arange(len(t))
    i, j = (int(above[0]), int(above[-1])) if above.size else (0, len(t) - 1)
    bounds = [0.0, float(t[i - 1]) if i > 0 else 0.0, float(t[j]), float(t[-1])]
    total = bounds[-1] or 1.0
    counts = [i, j - i + 1, len(t) - 1 - j]
    if len(t) < MIN_PM_SAMPLES:
        from profiler.names import NO_SECTION  # noqa: PLC0415

        out.update({"t_ns": [int(x) for x in t], "interval_ns": interval, "duration_ns": float(t[-1]),
                    "series": series, "sources": dict(smap), "activity": activity})
        out["missing"].append({"field": "phases", "section": NO_SECTION,
                               "reason": f"only {len(t)} PM samples in the launch (phases need {MIN_PM_SAMPLES})"})
        return out
    phases = [
        {"name": name, "start_ns": bounds[k], "end_ns": bounds[k + 1],
         "duration_ns": bounds[k + 1] - bounds[k], "share": (bounds[k + 1] - bounds[k]) / total,
         "samples": counts[k]}
        for k, name in enumerate(PHASES)
    ]
    out.update({
        "t_ns": [int(x) for x in t],
        "interval_ns": interval,
        "duration_ns": float(t[-1]),
        "series": series,
        "sources": dict(smap),
        "activity": activity,
        "steady_level": level,
        "phases": phases,
        "steady_tensor_pct": float(tensor[i:j + 1].mean()) if tensor.size else None,
        "tail_share": phases[2]["share"],
        "ramp_share": phases[0]["share"],
    })
    found = dips(np.asarray(t, dtype=float), np.array(series[activity], dtype=float), sm, level, i, j, series,
                 activity)
    out.update({"dips": found, "dip_share": float(sum(d["share"] for d in found)),
                "dip_period_ns": dip_period(found)})
    if not tensor.size:
        out["missing"].append(_missing("steady_tensor_pct", cfg["section"]))
    return out


#: the opcode classes of tensor-core MMA instructions (data/opcode_classes.toml)
MMA_CLASSES = ("HMMA", "HGMMA", "UTCMMA")


def mma_executed(launch) -> int | None:
    """Executed MMA instructions of the launch (every class of :data:`MMA_CLASSES`), None when the report does
    not count executed instructions."""
    from profiler.analyze.kernel import _class_executed  # noqa: PLC0415

    counts = [_class_executed(launch, c) for c in MMA_CLASSES]
    return None if any(c is None for c in counts) else int(sum(counts))


def dips(t: np.ndarray, raw: np.ndarray, sm: np.ndarray, level: float, i: int, j: int,
         series: dict[str, list[float]], activity: str) -> list[dict]:
    """The dips of the steady samples i..j (module docstring): the runs with ``sm`` (the smoothed activity)
    under ``DIP_FRACTION`` x the rolling median of ``raw`` around them, each widened by a sample on either side (within i..j). ``t`` the
    samples' times (a sample covers the interval ending there), ``raw`` the activity's samples, ``series``
    every series on the same times. Each dip: ``start_ns``, ``end_ns``, ``samples`` (the widened run),
    ``level``, ``min_pct``, ``deficit_ns``, ``share`` (of ``t[-1]``), ``rose`` {series: ratio}."""
    if level <= 0 or j - i < 2:
        return []
    ref = pd.Series(raw[i:j + 1]).rolling(DIP_WINDOW, center=True, min_periods=1).median().to_numpy()
    low = np.flatnonzero(sm[i:j + 1] < DIP_FRACTION * ref) + i
    if not low.size:
        return []
    splits = np.flatnonzero(np.diff(low) > 1) + 1
    # a run on the steady phase's first or last sample is the ramp's or the tail's edge, not a dip
    spans = [(max(i, int(r[0]) - 1), min(j, int(r[-1]) + 1)) for r in np.split(low, splits)
             if int(r[0]) > i and int(r[-1]) < j]
    merged: list[list[int]] = []  # widened runs that touch become one dip
    for a, b in spans:
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    calm = np.zeros(raw.size, dtype=bool)
    calm[i:j + 1] = True
    for a, b in merged:
        calm[a:b + 1] = False
    base = ({s: float(np.median(np.asarray(v, dtype=float)[calm])) for s, v in series.items() if s != activity}
            if calm.any() else {})
    interval = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    total = float(t[-1]) or 1.0
    idx = np.arange(raw.size)
    out = []
    for a, b in merged:
        seg = raw[a:b + 1]
        near = calm & (idx >= a - DIP_BASELINE_SAMPLES) & (idx <= b + DIP_BASELINE_SAMPLES)
        local = float(np.median(raw[near])) if near.any() else level
        if local <= 0 or float(seg.min()) >= DIP_FRACTION * local:
            continue  # the smoothing's echo of the ramp or the tail: no sample of it fell
        deficit = float(np.clip(local - seg, 0.0, None).sum() / local * interval)
        rose = {}
        for s, b0 in base.items():
            if b0 > 0:
                ratio = float(np.mean(np.asarray(series[s], dtype=float)[a:b + 1])) / b0
                if ratio >= DIP_RISE:
                    rose[s] = ratio
        out.append({"start_ns": float(t[a - 1]) if a > 0 else 0.0, "end_ns": float(t[b]), "samples": b - a + 1,
                    "level": local, "min_pct": float(seg.min()), "deficit_ns": deficit, "share": deficit / total,
                    "rose": dict(sorted(rose.items(), key=lambda kv: -kv[1])[:DIP_RISERS])})
    return out


def dip_period(found: list[dict]) -> float | None:
    """The median spacing of the dips' centres, from ``DIP_PERIOD_MIN`` dips on (else None)."""
    if len(found) < DIP_PERIOD_MIN:
        return None
    centres = np.array([(d["start_ns"] + d["end_ns"]) / 2 for d in found], dtype=float)
    return float(np.median(np.diff(centres)))


def _other_pass(t_s: np.ndarray, v_s: np.ndarray, t: np.ndarray) -> list[float]:
    """A series of another replay pass at the window's times: its own active window (values > 0)
    is started where the primary one starts, then each time takes the nearest sample."""
    idx = np.flatnonzero(v_s > 0)
    if idx.size == 0:
        return [0.0] * len(t)
    start = t_s[idx[0] - 1] if idx[0] > 0 else t_s[idx[0]]
    rel = t_s - start
    pos = np.clip(np.searchsorted(rel, t), 0, len(rel) - 1)
    return [float(v_s[p]) for p in pos]


def normalised(tl: dict, points: int = 50) -> pd.DataFrame:
    """The series of a :func:`timeline` result on normalised time x in (0, 1] (``points`` bins, each
    the mean of the samples ending in it, carried forward where a bin has none), plus warp-state
    shares ``share_<reason>`` (each reason's warps over all sampled reasons' warps in the bin).
    Columns: ``x``, every series, ``share_<reason>``. Empty frame without a timeline."""
    if not tl or tl.get("t_ns") is None:
        return pd.DataFrame()
    t = np.array(tl["t_ns"], dtype=float)
    x = t / (t[-1] or 1.0)
    edges = np.linspace(0, 1, points + 1)
    which = np.clip(np.searchsorted(edges, x, side="left") - 1, 0, points - 1)
    frame = pd.DataFrame({"bin": which, **{s: v for s, v in tl["series"].items()}})
    binned = frame.groupby("bin").mean().reindex(range(points)).ffill().bfill()
    binned.insert(0, "x", edges[1:])
    warps = [c for c in binned.columns if c.startswith("warps_")]
    if warps:
        total = binned[warps].sum(axis=1).replace(0, np.nan)
        for c in warps:
            binned["share_" + c[len("warps_"):]] = (binned[c] / total).fillna(0.0)
    return binned.reset_index(drop=True)


def brief(launch, points: int = 50) -> dict:
    """The ``timeline`` field of a launch summary (what diff, migration and the HTML report compare):
    ``phases`` [{name, share, duration_ns}], ``steady_tensor_pct``, ``tail_share``, ``ramp_share``,
    ``duration_ns``, ``interval_ns``, ``activity``, ``dip_share``, ``dip_count`` (the steady state's dips),
    ``curve`` {x, tensor_pct, issue_pct, warps {reason: [share]}} on ``points`` bins of normalised time (None
    without PM sampling), ``missing``."""
    tl = timeline(launch)
    out = {k: tl[k] for k in ("steady_tensor_pct", "tail_share", "ramp_share", "duration_ns", "interval_ns",
                              "activity", "dip_share", "missing")}
    out["dip_count"] = None if tl["dips"] is None else len(tl["dips"])
    out["phases"] = ([{"name": p["name"], "share": p["share"], "duration_ns": p["duration_ns"]}
                      for p in tl["phases"]] if tl["phases"] else None)
    curve = None
    if tl["t_ns"] is not None:
        n = normalised(tl, points)
        curve = {"x": [round(float(x), 4) for x in n["x"]]}
        for s in ("tensor_pct", "issue_pct"):
            if s in n:
                curve[s] = [round(float(v), 3) for v in n[s]]
        warps = {c[len("share_"):]: [round(float(v), 4) for v in n[c]] for c in n.columns if c.startswith("share_")}
        curve["warps"] = warps or None
    out["curve"] = curve
    return out


def phase_change_noise(a: dict | None, b: dict | None) -> float | None:
    """The smallest phase-share change that counts (a share of the kernel's time): two PM intervals of
    the shorter kernel (the phase boundaries are only known to a sample); None without both timelines."""
    if not a or not b or not a.get("duration_ns") or not b.get("duration_ns"):
        return None
    return max(PHASE_NOISE_INTERVALS * a["interval_ns"] / a["duration_ns"],
               PHASE_NOISE_INTERVALS * b["interval_ns"] / b["duration_ns"])


def timelines(path, kernel: str | None = None) -> list[dict]:
    """:func:`timeline` for every launch of the report at ``path`` matching the regex ``kernel``."""
    from profiler.report import load_report, select_launches

    return [timeline(la) for la in select_launches(load_report(path), kernel)]
