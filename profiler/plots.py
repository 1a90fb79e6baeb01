"""Plotly figures of the comparison views. Figures only: every function takes frames computed
elsewhere (:mod:`profiler.compare`) and draws them; nothing here computes an analysis.

plotly is imported inside each function, so importing this module costs nothing on machines
without it (the GPU box).
"""

from __future__ import annotations

import math

import pandas as pd

# One colour per stall reason, stable across figures (ncu's reason names).
REASON_COLORS = {
    "long_scoreboard": "#1f77b4", "short_scoreboard": "#ff7f0e", "barrier": "#2ca02c",
    "math_pipe_throttle": "#d62728", "mio_throttle": "#9467bd", "wait": "#8c564b",
    "not_selected": "#e377c2", "selected": "#7f7f7f", "warpgroup_arrive": "#bcbd22",
    "gmma": "#bcbd22", "lg_throttle": "#17becf", "dispatch_stall": "#aec7e8",
    "branch_resolving": "#ffbb78", "no_instructions": "#98df8a", "membar": "#ff9896",
    "drain": "#c5b0d5", "imc_miss": "#c49c94", "misc": "#f7b6d2", "sleeping": "#c7c7c7",
    "tex_throttle": "#dbdb8d",
}
LEVEL_TITLES = {"smem": "Shared memory", "l1": "L1", "l2": "L2", "dram": "DRAM"}
_TEMPLATE = "plotly_white"


def _go():
    import plotly.graph_objects as go  # noqa: PLC0415

    return go


def _color(reason: str) -> str:
    return REASON_COLORS.get(reason, "#444444")


def stall_breakdown(shares: pd.DataFrame, title: str = "Stall reasons") -> "object":
    """Horizontal bars of one version's stall shares with their intervals.

    ``shares``: reason, share, lo, hi (fractions), e.g. ``Migration.stall_shares`` of one version."""
    go = _go()
    df = shares[shares["share"] > 0].sort_values("share")
    fig = go.Figure(go.Bar(
        x=100 * df["share"], y=df["reason"], orientation="h",
        marker_color=[_color(r) for r in df["reason"]],
        error_x=dict(type="data", symmetric=False, array=100 * (df["hi"] - df["share"]),
                     arrayminus=100 * (df["share"] - df["lo"])),
        hovertemplate="%{y}: %{x:.1f}%<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, xaxis_title="share of stall samples (%)",
                      height=max(260, 22 * len(df) + 120), margin=dict(l=140))
    return fig


def who_waits_heatmap(waits: pd.DataFrame, title: str = "Who waits on whom (share of samples, %)",
                      share_col: str = "share") -> "object":
    """Opcode class x stall reason heatmap. ``waits``: class, reason, ``share_col`` (fractions)."""
    go = _go()
    if not len(waits):
        return _empty(title, "no stall samples")
    piv = waits.pivot_table(index="class", columns="reason", values=share_col, aggfunc="sum", fill_value=0.0)
    piv = piv.loc[piv.sum(axis=1).sort_values().index, piv.sum(axis=0).sort_values(ascending=False).index]
    fig = go.Figure(go.Heatmap(z=100 * piv.to_numpy(), x=list(piv.columns), y=list(piv.index),
                               colorscale="Reds", colorbar=dict(title="%"),
                               hovertemplate="%{y} · %{x}: %{z:.1f}%<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, height=max(300, 24 * len(piv) + 160),
                      margin=dict(l=110, b=140), xaxis_tickangle=-40)
    return fig


def diff_shares(table: pd.DataFrame, key: str = "reason", label_a: str = "A", label_b: str = "B",
                title: str = "Stall shares, A and B") -> "object":
    """Grouped bars of A's and B's shares with intervals. ``table``: ``Diff.stalls`` (or
    ``Diff.classes`` with ``key='class'``)."""
    go = _go()
    df = table[(table["share_a"] > 0) | (table["share_b"] > 0)].iloc[::-1]
    fig = go.Figure()
    for side, name, color in (("a", label_a, "#9ecae1"), ("b", label_b, "#08519c")):
        fig.add_trace(go.Bar(
            y=df[key], x=100 * df[f"share_{side}"], name=name, orientation="h", marker_color=color,
            error_x=dict(type="data", symmetric=False, array=100 * (df[f"hi_{side}"] - df[f"share_{side}"]),
                         arrayminus=100 * (df[f"share_{side}"] - df[f"lo_{side}"])),
            hovertemplate="%{y}: %{x:.1f}%<extra>" + name + "</extra>"))
    fig.update_layout(template=_TEMPLATE, barmode="group", title=title, xaxis_title="share of stall samples (%)",
                      height=max(300, 34 * len(df) + 140), margin=dict(l=160))
    return fig


def diff_deltas(table: pd.DataFrame, key: str = "reason", title: str = "Change B − A (percentage points)") -> "object":
    """Bars of each share's change with its interval; significant changes dark, noise pale."""
    go = _go()
    df = table[(table["share_a"] > 0) | (table["share_b"] > 0)].iloc[::-1]
    colors = ["#b2182b" if (s and d > 0) else "#2166ac" if s else "#cccccc"
              for s, d in zip(df["significant"], df["delta"])]
    labels = [f"{k}{'' if s else ' (noise)'}" for k, s in zip(df[key], df["significant"])]
    fig = go.Figure(go.Bar(
        y=labels, x=100 * df["delta"], orientation="h", marker_color=colors,
        error_x=dict(type="data", symmetric=False, array=100 * (df["delta_hi"] - df["delta"]),
                     arrayminus=100 * (df["delta"] - df["delta_lo"])),
        hovertemplate="%{y}: %{x:+.1f} pp<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, xaxis_title="Δ share (pp)", height=max(280, 24 * len(df) + 140),
                      margin=dict(l=190))
    return fig


def migration_stalls(stall_shares: pd.DataFrame, title: str = "Stall shares per version") -> "object":
    """Stacked bars: one bar per version, one segment per stall reason. ``Migration.stall_shares``."""
    go = _go()
    fig = go.Figure()
    versions = list(dict.fromkeys(stall_shares["version"]))
    for reason in dict.fromkeys(stall_shares["reason"]):
        sub = stall_shares[stall_shares["reason"] == reason].set_index("version").reindex(versions)
        if not (sub["share"] > 0).any():
            continue
        fig.add_trace(go.Bar(x=versions, y=100 * sub["share"].fillna(0), name=reason, marker_color=_color(reason),
                             hovertemplate="%{x} · " + reason + ": %{y:.1f}%<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, barmode="stack", title=title, yaxis_title="share of stall samples (%)",
                      legend=dict(traceorder="normal"), height=460)
    return fig


def waiter_path(waiters: pd.DataFrame, table: pd.DataFrame | None = None,
                title: str = "The top waiters across versions") -> "object":
    """Lines: the share of each class·reason that is some version's top waiter, per version;
    the version's own top waiter is ringed. ``Migration.waiters`` (+ ``Migration.table``)."""
    go = _go()
    fig = go.Figure()
    versions = list(dict.fromkeys(waiters["version"]))
    tops = set()
    if table is not None and len(table):
        tops = {(v, c, r) for v, c, r in zip(table["version"], table["top_class"], table["top_reason"])}
    for (cls, reason), sub in waiters.groupby(["class", "reason"], sort=False):
        sub = sub.set_index("version").reindex(versions)
        ring = [bool((v, cls, reason) in tops) for v in versions]
        fig.add_trace(go.Scatter(
            x=versions, y=100 * sub["share"], mode="lines+markers", name=f"{cls}·{reason}",
            marker=dict(size=[14 if r else 7 for r in ring], line=dict(width=[2 if r else 0 for r in ring],
                                                                           color="black")),
            hovertemplate="%{x}: %{y:.1f}%<extra>" + f"{cls}·{reason}" + "</extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, yaxis_title="share of stall samples (%)", height=420)
    return fig


def ladder_speed(table: pd.DataFrame, title: str = "Achieved TFLOPS per version") -> "object":
    """Bars of achieved TFLOPS with the duration in the hover. ``Migration.table``."""
    go = _go()
    fig = go.Figure(go.Bar(x=table["version"], y=table["tflops"], marker_color="#31a354",
                           customdata=table[["duration_ns"]].to_numpy(),
                           hovertemplate="%{x}: %{y:.0f} TFLOPS, %{customdata[0]:.0f} ns<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, yaxis_title="TFLOPS", height=360)
    return fig


#: one colour per version in the roofline (hover names it, the legend lists it): no label drawn beside a point
_ROOF_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")


def _log(x):
    return math.log10(x) if x and x > 0 else None


def roofline_trajectory(points: pd.DataFrame, roofs: pd.DataFrame,
                        title: str = "Roofline trajectory (one arrow per step)") -> "object":
    """One panel per memory level (shared memory, L1, L2, DRAM; a level no version has is left
    out), log-log: the roofs of the tensor paths used
    (``Migration.roofs``) and one point per version joined by arrows (``Migration.roofline``)."""
    go = _go()
    from plotly.subplots import make_subplots  # noqa: PLC0415

    have = set(points.dropna(subset=["intensity"])["level"]) if len(points) else set()
    levels = [lv for lv in LEVEL_TITLES if lv in have] or list(LEVEL_TITLES)
    fig = make_subplots(rows=1, cols=len(levels), subplot_titles=[LEVEL_TITLES[lv] for lv in levels],
                        horizontal_spacing=0.06)
    dashes = ["solid", "dash", "dot", "dashdot"]
    shown: set = set()  # versions already in the legend
    rank = {v: i for i, v in enumerate(dict.fromkeys(points["version"]))} if len(points) else {}  # ladder order:
    # a version's colour (the same in every panel) and its place in the legend
    for col, lv in enumerate(levels, start=1):
        r = roofs[roofs["level"] == lv]
        for i, (path, sub) in enumerate(r.groupby("path", sort=False, dropna=False)):
            fig.add_trace(go.Scatter(x=sub["intensity"], y=sub["tflops"], mode="lines",
                                     line=dict(color="#555555", dash=dashes[i % len(dashes)], width=1.5),
                                     name=f"roof ({path})", legendgroup=f"roof-{path}", showlegend=(col == 1),
                                     legendrank=50,
                                     hovertemplate="roof " + str(path) + ": %{y:.0f} TFLOPS at %{x:.3g} FLOP/B"
                                                   "<extra></extra>"), row=1, col=col)
        p = points[(points["level"] == lv)].dropna(subset=["intensity", "tflops"])
        p = p[(p["intensity"] > 0) & (p["tflops"] > 0)]
        for v, one in p.groupby("version", sort=False):  # no text beside the points: hover + one legend entry each
            fig.add_trace(go.Scatter(x=one["intensity"], y=one["tflops"], mode="markers",
                                     marker=dict(size=10, color=_ROOF_PALETTE[rank.get(v, 0) % len(_ROOF_PALETTE)],
                                                 line=dict(width=1, color="#ffffff")),
                                     name=str(v), legendgroup=f"v-{v}", showlegend=v not in shown,
                                     legendrank=100 + rank.get(v, 0),
                                     hovertemplate=f"{v}: " + "%{y:.0f} TFLOPS at %{x:.3g} FLOP/B<extra></extra>"),
                          row=1, col=col)
            shown.add(v)
        xs, ys = list(p["intensity"]), list(p["tflops"])
        axis = "" if col == 1 else str(col)
        for i in range(1, len(xs)):
            fig.add_annotation(x=_log(xs[i]), y=_log(ys[i]), ax=_log(xs[i - 1]), ay=_log(ys[i - 1]),
                               xref=f"x{axis}", yref=f"y{axis}", axref=f"x{axis}", ayref=f"y{axis}",
                               showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=1.5, arrowcolor="#d62728",
                               text="")
        fig.update_xaxes(type="log", title_text="FLOP / byte", row=1, col=col)
        fig.update_yaxes(type="log", row=1, col=col)
    fig.update_yaxes(title_text="TFLOPS", row=1, col=1)
    fig.update_layout(template=_TEMPLATE, title=title, height=480,
                      legend=dict(orientation="h", yanchor="top", y=-0.18, xanchor="left", x=0))
    return fig


def _empty(title: str, message: str):
    go = _go()
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(template=_TEMPLATE, title=title, height=200, xaxis_visible=False, yaxis_visible=False)
    return fig


# --- timelines and regions ----------------------------------------------------------------------

REGION_COLORS = {
    "load_q": "#9ecae1", "load_kv": "#3182bd", "qk": "#e6550d", "softmax": "#31a354", "pv": "#fd8d3c",
    "epilogue": "#756bb1", "sync": "#636363", "other": "#d9d9d9",
}
PHASE_COLORS = {"ramp": "#fdae6b", "steady": "#74c476", "tail": "#de2d26"}


def timeline_curves(timelines: pd.DataFrame, series: str = "tensor_pct",
                    title: str = "Tensor pipe over the kernel's time (PM sampling, % of peak)") -> "object":
    """One line per version of ``series`` over normalised time. ``Migration.timelines`` (version, x,
    series, value)."""
    go = _go()
    sub = timelines[timelines["series"] == series] if len(timelines) else timelines
    if not len(sub):
        return _empty(title, "no PM sampling in these reports (section WhowaitsPmSampling)")
    fig = go.Figure()
    for version, g in sub.groupby("version", sort=False):
        fig.add_trace(go.Scatter(x=100 * g["x"], y=g["value"], mode="lines", name=str(version),
                                 hovertemplate=f"{version}" + ": %{y:.1f} at %{x:.0f}% of the time<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, title=title, xaxis_title="time (% of the kernel's duration)",
                      yaxis_title="% of peak" if series.endswith("_pct") else series, height=380)
    return fig


def warp_state_curves(timelines: pd.DataFrame,
                      title: str = "Warp states over the kernel's time (share of sampled warps)") -> "object":
    """Stacked areas of the warp-state shares over normalised time, one panel per version that has them."""
    go = _go()
    from plotly.subplots import make_subplots  # noqa: PLC0415

    sub = timelines[timelines["series"].str.startswith("warps_")] if len(timelines) else timelines
    if not len(sub):
        return _empty(title, "no warp states over time in these reports (section WhowaitsPmWarpStates)")
    versions = list(dict.fromkeys(sub["version"]))
    fig = make_subplots(rows=len(versions), cols=1, shared_xaxes=True, subplot_titles=versions,
                        vertical_spacing=min(0.08, 0.3 / max(1, len(versions))))
    shown = set()
    for i, v in enumerate(versions, start=1):
        g = sub[sub["version"] == v]
        for series, h in g.groupby("series", sort=False):
            reason = series[len("warps_"):]
            fig.add_trace(go.Scatter(x=100 * h["x"], y=100 * h["value"], mode="lines", stackgroup=f"s{i}",
                                     name=reason, legendgroup=reason, showlegend=reason not in shown,
                                     line=dict(width=0.5, color=_color(reason)),
                                     hovertemplate=f"{v} · {reason}" + ": %{y:.0f}%<extra></extra>"),
                          row=i, col=1)
            shown.add(reason)
    fig.update_xaxes(title_text="time (% of the kernel's duration)", row=len(versions), col=1)
    fig.update_layout(template=_TEMPLATE, title=title, height=max(320, 170 * len(versions)))
    return fig


def phase_bars(table: pd.DataFrame, title: str = "Ramp-up, steady state and tail (share of the kernel's time)") -> "object":
    """Stacked horizontal bars of the phase shares per version. ``Migration.table`` (ramp_share, …)."""
    go = _go()
    if "tail_share" not in table or not table["tail_share"].notna().any():
        return _empty(title, "no PM sampling in these reports (section WhowaitsPmSampling)")
    df = table[table["tail_share"].notna()]
    fig = go.Figure()
    for ph in ("ramp", "steady", "tail"):
        fig.add_trace(go.Bar(y=df["version"], x=100 * df[f"{ph}_share"], name=ph, orientation="h",
                             marker_color=PHASE_COLORS[ph], hovertemplate="%{y} · " + ph + ": %{x:.1f}%<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, barmode="stack", title=title, xaxis_title="% of the kernel's time",
                      height=max(240, 34 * len(df) + 140), margin=dict(l=170), yaxis=dict(autorange="reversed"))
    return fig


def region_bars(regions: pd.DataFrame, title: str = "Where the samples sit: source regions per version") -> "object":
    """Stacked bars of the region shares per version (declared or inferred, named in the hover)."""
    go = _go()
    if not len(regions):
        return _empty(title, "no per-PC samples")
    versions = list(dict.fromkeys(regions["version"]))
    src = regions.groupby("version")["source"].agg(lambda s: "/".join(sorted(set(s)))).reindex(versions)
    fig = go.Figure()
    for name in dict.fromkeys(regions["region"]):
        sub = regions[regions["region"] == name].set_index("version").reindex(versions)
        fig.add_trace(go.Bar(x=[f"{v} ({src[v][0]})" for v in versions], y=100 * sub["share"].fillna(0), name=name,
                             marker_color=REGION_COLORS.get(name, "#444444"),
                             hovertemplate="%{x} · " + name + ": %{y:.1f}%<extra></extra>"))
    fig.update_layout(template=_TEMPLATE, barmode="stack", title=title + " (d = declared, i = inferred)",
                      yaxis_title="share of samples (%)", height=440)
    return fig


def role_graph(edges: list[dict], title: str = "Who waits on whom between warp roles", inferred: bool = False,
               note: str = "") -> "object":
    """The role wait graph of one version: an arrow ``waiter → releaser`` (the waiter waits on the
    releaser) per pair, its width the summed share of the launch's samples, labelled with each barrier
    and its share; a dashed arrow where every edge of the pair is ``inferred``. ``edges``: dicts with
    waiter, barrier, releaser, share, inferred (a summary's ``role_edges``). ``inferred`` marks the whole
    graph (no source: roles and pairings read from the SASS alone, e.g. cuDNN) in the title."""
    go = _go()
    edges = [e for e in edges if (e.get("share") or 0) > 0]
    if inferred:
        title = f"{title} — inferred (no source: roles and barriers read from the SASS)"
    if not edges:
        return _empty(title, "no wait site with samples")
    pairs: dict[tuple[str, str], list[dict]] = {}
    for e in edges:
        pairs.setdefault((e["waiter"], e["releaser"]), []).append(e)
    waiters = list(dict.fromkeys(e["waiter"] for e in edges))
    others = [r for r in dict.fromkeys(e["releaser"] for e in edges) if r not in waiters]
    nodes = waiters + others
    pos = {}
    for k, n in enumerate(waiters):  # waiting roles on the left, what they wait on to the right
        pos[n] = (0.0, 1.0 - (k + 0.5) / len(waiters))
    for k, n in enumerate(others):
        pos[n] = (1.0, 1.0 - (k + 0.5) / len(others))
    fig = go.Figure()
    top = max(sum(e["share"] for e in es) for es in pairs.values())
    for (w, r), es in sorted(pairs.items(), key=lambda kv: -sum(e["share"] for e in kv[1])):
        share = sum(e["share"] for e in es)
        x0, y0 = pos[w]
        x1, y1 = pos[r]
        if (x0, y0) == (x1, y1):
            continue
        dashed = all(e.get("inferred") for e in es)
        width = 1.5 + 8.0 * share / top
        label = "<br>".join(f"{e['barrier']}: {100 * e['share']:.1f}%{' (inferred)' if e.get('inferred') else ''}"
                            for e in sorted(es, key=lambda e: -e["share"]))
        fig.add_trace(go.Scatter(x=[x0, x1], y=[y0, y1], mode="lines", hoverinfo="text", hovertext=label,
                                 line=dict(width=width, color="#1f77b4" if not dashed else "#ff7f0e",
                                           dash="dash" if dashed else "solid"), showlegend=False))
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                           showarrow=True, arrowhead=3, arrowsize=1, arrowwidth=max(1.0, width / 3),
                           arrowcolor="#1f77b4" if not dashed else "#ff7f0e", standoff=14, startstandoff=14)
        fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=label, showarrow=False,
                           font=dict(size=10), bgcolor="rgba(255,255,255,0.8)")
    fig.add_trace(go.Scatter(x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text",
                             text=nodes, textposition=["middle left" if pos[n][0] == 0 else "middle right" for n in nodes],
                             marker=dict(size=18, color=["#2ca02c" if n in waiters else "#7f7f7f" for n in nodes]),
                             hoverinfo="text", showlegend=False))
    fig.update_layout(template=_TEMPLATE, title=title, height=max(260, 90 * max(len(waiters), len(others)) + 140),
                      xaxis=dict(visible=False, range=[-0.6, 1.6]), yaxis=dict(visible=False, range=[-0.05, 1.05]),
                      margin=dict(l=20, r=20), annotations=list(fig.layout.annotations) + (
                          [dict(text=note, x=0.5, y=-0.04, xref="paper", yref="paper", showarrow=False,
                                font=dict(size=10))] if note else []))
    return fig
