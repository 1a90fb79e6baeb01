"""Plotly figures of the comparison views. Figures only: every function takes frames computed
elsewhere (:mod:`profiler.compare`) and draws them; nothing here computes an analysis.

Each drawing function builds a plain plotly figure dict (``{"data": [...], "layout": {...}}``) and,
decorated with :func:`_drawn`, returns it as a ``go.Figure`` (:func:`figure`: plotly's validation runs
there): what a notebook shows, edits or wraps in a widget. ``fn.spec(...)`` returns the dict itself,
unvalidated, which is what the HTML report embeds (:func:`page_dict`, then ``plotly.io.to_html(...,
validate=False)``): validation was most of the cost of drawing a page (measured 2026-12-01 on the
committed ladder's migration page, 114 figures: 2.5 s of CPU in ``go.Figure`` construction, 0.15 s
writing their JSON). Since nothing validates a dict on its way to the page, a spec is written the way
validation would leave it: ``title`` as ``{"text": ...}``, no ``xaxis_title``-style shorthand, colour
scales as lists (:func:`_colorscale`: plotly.js has its own scales under some of the same names),
subplots through :func:`_grid` (``make_subplots``' arithmetic); the template stays a name that
:func:`page_dict` expands. tests/test_plots_spec.py holds the embedded JSON equal to the validated
figure's, for every figure of the committed pages.

plotly is imported inside each function, so importing this module costs nothing on machines
without it (the GPU box).
"""

from __future__ import annotations

import functools
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


def figure(spec: dict) -> "object":
    """The ``go.Figure`` of a figure dict, through plotly's validation (every property checked, the
    template's name expanded): what a notebook shows, edits or wraps in a ``go.FigureWidget``."""
    return _go().Figure(spec)


def _drawn(build):
    """Decorator of a figure-dict builder: the function returns :func:`figure` of the dict; ``fn.spec``
    is the builder itself (the plain dict, unvalidated: what :mod:`profiler.html` serialises)."""

    @functools.wraps(build)
    def draw(*args, **kwargs):
        return figure(build(*args, **kwargs))

    draw.spec = build
    return draw


@functools.lru_cache(maxsize=None)
def _template(name: str) -> dict:
    """A named plotly template as the dict that ``go.Figure`` puts in ``layout.template`` (shared: never
    mutate it)."""
    import plotly.io as pio  # noqa: PLC0415

    return pio.templates[name].to_plotly_json()


def page_dict(spec: dict) -> dict:
    """``spec`` as a page embeds it, what ``go.Figure(spec).to_dict()`` gives without its validation: the
    template's name replaced by the template (plotly.js knows no names) and every numeric array (numpy,
    pandas) as plotly's base64 typed array. ``spec`` itself is left as it was."""
    from _plotly_utils.utils import is_homogeneous_array, is_skipped_key, to_typed_array_spec  # noqa: PLC0415

    def typed(obj):  # plotly's convert_to_base64 (BaseFigure.to_dict), on a copy
        if isinstance(obj, dict):
            return {k: v if is_skipped_key(k) else to_typed_array_spec(v) if is_homogeneous_array(v) else typed(v)
                    for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [typed(v) for v in obj]
        return obj

    layout = dict(spec.get("layout") or {})
    template = layout.pop("template", None)
    out = {"data": typed(spec.get("data") or []), "layout": typed(layout)}
    if template is not None:
        out["layout"]["template"] = _template(template) if isinstance(template, str) else typed(template)
    return out


def _color(reason: str) -> str:
    return REASON_COLORS.get(reason, "#444444")


def _layout(title: str, **props) -> dict:
    """A figure's layout in the house template; ``props`` as plotly's layout keys (no ``xaxis_title``
    shorthand: the dicts are not validated, so they are written the way validation would leave them)."""
    return {"template": _TEMPLATE, "title": {"text": title}, **props}


def _axis_title(text: str, **props) -> dict:
    return {"title": {"text": text}, **props}


def _colorscale(name: str) -> list:
    """A named colour scale as the list validation makes of it: plotly.js has scales of its own under some of
    the same names (its ``Reds`` is not plotly.py's), so a name is never handed to it."""
    from plotly.colors import get_colorscale  # noqa: PLC0415

    return get_colorscale(name)


def _error(array, arrayminus) -> dict:
    return {"type": "data", "symmetric": False, "array": array, "arrayminus": arrayminus}


def _grid(rows: int, cols: int, titles: list, horizontal_spacing: float | None = None,
          vertical_spacing: float | None = None, shared_xaxes: bool = False) -> tuple[dict, list[list[dict]]]:
    """The layout keys of ``plotly.subplots.make_subplots(rows, cols, subplot_titles=titles, …)`` (top-left
    start, every cell an ``xy`` subplot) and, per cell, the axis references its traces carry
    (``{"xaxis": "x2", "yaxis": "y2"}``). Same arithmetic as plotly's, so the domains are the same floats."""
    hs = 0.2 / cols if horizontal_spacing is None else horizontal_spacing
    vs = 0.3 / rows if vertical_spacing is None else vertical_spacing
    widths = [(1.0 - hs * (cols - 1)) / cols] * cols
    heights = [(1.0 - vs * (rows - 1)) / rows] * rows
    layout: dict = {}
    refs: list[list[dict]] = [[{} for _ in range(cols)] for _ in range(rows)]
    annotations = []
    k = 0
    for r in range(rows):
        rr = rows - 1 - r  # the first row is drawn on top
        for c in range(cols):
            k += 1
            x_s = sum(widths[:c]) + c * hs
            x_e = x_s + widths[c]
            y_s = sum(heights[:rr]) + rr * vs
            y_e = y_s + heights[-1 - r]
            y_s, y_e = (min(1.0, max(0.0, y)) for y in (y_s, y_e))
            n = str(k) if k > 1 else ""
            layout[f"xaxis{n}"] = {"domain": [max(0.0, x_s), min(1.0, x_e)], "anchor": f"y{n}"}
            layout[f"yaxis{n}"] = {"domain": [max(0.0, y_s), min(1.0, y_e)], "anchor": f"x{n}"}
            refs[r][c] = {"xaxis": f"x{n}", "yaxis": f"y{n}"}
            if k - 1 < len(titles) and titles[k - 1]:
                annotations.append({"y": y_e, "xref": "paper", "x": (x_s + x_e) / 2.0, "yref": "paper",
                                    "text": titles[k - 1], "showarrow": False, "font": {"size": 16},
                                    "xanchor": "center", "yanchor": "bottom"})
    if shared_xaxes:  # each column's axes match its bottom row's, which alone keeps tick labels
        for c in range(cols):
            first = refs[rows - 1][c]["xaxis"]
            for r in range(rows - 1):
                name = "xaxis" + refs[r][c]["xaxis"][1:]
                layout[name].update(matches=first, showticklabels=False)
    layout["annotations"] = annotations
    return layout, refs


@_drawn
def stall_breakdown(shares: pd.DataFrame, title: str = "Stall reasons") -> dict:
    """Horizontal bars of one version's stall shares with their intervals.

    ``shares``: reason, share, lo, hi (fractions), e.g. ``Migration.stall_shares`` of one version."""
    df = shares[shares["share"] > 0].sort_values("share")
    bar = {"type": "bar", "x": 100 * df["share"], "y": df["reason"], "orientation": "h",
           "marker": {"color": [_color(r) for r in df["reason"]]},
           "error_x": _error(100 * (df["hi"] - df["share"]), 100 * (df["share"] - df["lo"])),
           "hovertemplate": "%{y}: %{x:.1f}%<extra></extra>"}
    return {"data": [bar], "layout": _layout(title, xaxis=_axis_title("share of stall samples (%)"),
                                             height=max(260, 22 * len(df) + 120), margin={"l": 140})}


@_drawn
def who_waits_heatmap(waits: pd.DataFrame, title: str = "Who waits on whom (share of samples, %)",
                      share_col: str = "share") -> dict:
    """Opcode class x stall reason heatmap. ``waits``: class, reason, ``share_col`` (fractions)."""
    if not len(waits):
        return _empty(title, "no stall samples")
    piv = waits.groupby(["class", "reason"])[share_col].sum().unstack(fill_value=0.0)  # pivot_table's, 4x cheaper
    piv = piv.loc[piv.sum(axis=1).sort_values().index, piv.sum(axis=0).sort_values(ascending=False).index]
    heat = {"type": "heatmap", "z": 100 * piv.to_numpy(), "x": list(piv.columns), "y": list(piv.index),
            "colorscale": _colorscale("Reds"), "colorbar": {"title": {"text": "%"}},
            "hovertemplate": "%{y} · %{x}: %{z:.1f}%<extra></extra>"}
    return {"data": [heat], "layout": _layout(title, height=max(300, 24 * len(piv) + 160),
                                              margin={"l": 110, "b": 140}, xaxis={"tickangle": -40})}


@_drawn
def diff_shares(table: pd.DataFrame, key: str = "reason", label_a: str = "A", label_b: str = "B",
                title: str = "Stall shares, A and B") -> dict:
    """Grouped bars of A's and B's shares with intervals. ``table``: ``Diff.stalls`` (or
    ``Diff.classes`` with ``key='class'``)."""
    df = table[(table["share_a"] > 0) | (table["share_b"] > 0)].iloc[::-1]
    data = [{"type": "bar", "y": df[key], "x": 100 * df[f"share_{side}"], "name": name, "orientation": "h",
             "marker": {"color": color},
             "error_x": _error(100 * (df[f"hi_{side}"] - df[f"share_{side}"]),
                               100 * (df[f"share_{side}"] - df[f"lo_{side}"])),
             "hovertemplate": "%{y}: %{x:.1f}%<extra>" + name + "</extra>"}
            for side, name, color in (("a", label_a, "#9ecae1"), ("b", label_b, "#08519c"))]
    return {"data": data, "layout": _layout(title, barmode="group", xaxis=_axis_title("share of stall samples (%)"),
                                            height=max(300, 34 * len(df) + 140), margin={"l": 160})}


@_drawn
def diff_deltas(table: pd.DataFrame, key: str = "reason", title: str = "Change B − A (percentage points)") -> dict:
    """Bars of each share's change with its interval; significant changes dark, noise pale."""
    df = table[(table["share_a"] > 0) | (table["share_b"] > 0)].iloc[::-1]
    colors = ["#b2182b" if (s and d > 0) else "#2166ac" if s else "#cccccc"
              for s, d in zip(df["significant"], df["delta"])]
    labels = [f"{k}{'' if s else ' (noise)'}" for k, s in zip(df[key], df["significant"])]
    bar = {"type": "bar", "y": labels, "x": 100 * df["delta"], "orientation": "h", "marker": {"color": colors},
           "error_x": _error(100 * (df["delta_hi"] - df["delta"]), 100 * (df["delta"] - df["delta_lo"])),
           "hovertemplate": "%{y}: %{x:+.1f} pp<extra></extra>"}
    return {"data": [bar], "layout": _layout(title, xaxis=_axis_title("Δ share (pp)"),
                                             height=max(280, 24 * len(df) + 140), margin={"l": 190})}


@_drawn
def migration_stalls(stall_shares: pd.DataFrame, title: str = "Stall shares per version") -> dict:
    """Stacked bars: one bar per version, one segment per stall reason. ``Migration.stall_shares``."""
    data = []
    versions = list(dict.fromkeys(stall_shares["version"]))
    for reason in dict.fromkeys(stall_shares["reason"]):
        sub = stall_shares[stall_shares["reason"] == reason].set_index("version").reindex(versions)
        if not (sub["share"] > 0).any():
            continue
        data.append({"type": "bar", "x": versions, "y": 100 * sub["share"].fillna(0), "name": reason,
                     "marker": {"color": _color(reason)},
                     "hovertemplate": "%{x} · " + reason + ": %{y:.1f}%<extra></extra>"})
    return {"data": data, "layout": _layout(title, barmode="stack", yaxis=_axis_title("share of stall samples (%)"),
                                            legend={"traceorder": "normal"}, height=460)}


@_drawn
def waiter_path(waiters: pd.DataFrame, table: pd.DataFrame | None = None,
                title: str = "The top waiters across versions") -> dict:
    """Lines: the share of each class·reason that is some version's top waiter, per version;
    the version's own top waiter is ringed. ``Migration.waiters`` (+ ``Migration.table``)."""
    data = []
    versions = list(dict.fromkeys(waiters["version"]))
    tops = set()
    if table is not None and len(table):
        tops = {(v, c, r) for v, c, r in zip(table["version"], table["top_class"], table["top_reason"])}
    for (cls, reason), sub in waiters.groupby(["class", "reason"], sort=False):
        sub = sub.set_index("version").reindex(versions)
        ring = [bool((v, cls, reason) in tops) for v in versions]
        data.append({"type": "scatter", "x": versions, "y": 100 * sub["share"], "mode": "lines+markers",
                     "name": f"{cls}·{reason}",
                     "marker": {"size": [14 if r else 7 for r in ring],
                                "line": {"width": [2 if r else 0 for r in ring], "color": "black"}},
                     "hovertemplate": "%{x}: %{y:.1f}%<extra>" + f"{cls}·{reason}" + "</extra>"})
    return {"data": data, "layout": _layout(title, yaxis=_axis_title("share of stall samples (%)"), height=420)}


@_drawn
def ladder_speed(table: pd.DataFrame, title: str = "Achieved TFLOPS per version") -> dict:
    """Bars of achieved TFLOPS with the duration in the hover. ``Migration.table``."""
    bar = {"type": "bar", "x": table["version"], "y": table["tflops"], "marker": {"color": "#31a354"},
           "customdata": table[["duration_ns"]].to_numpy(),
           "hovertemplate": "%{x}: %{y:.0f} TFLOPS, %{customdata[0]:.0f} ns<extra></extra>"}
    return {"data": [bar], "layout": _layout(title, yaxis=_axis_title("TFLOPS"), height=360)}


#: one colour per version in the roofline (hover names it, the legend lists it): no label drawn beside a point
_ROOF_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd")


def _log(x):
    return math.log10(x) if x and x > 0 else None


ROOF_LEGEND_PER_ROW = 5  # roofline legend entries a row (a version id is ~25 characters)
ROOF_LEGEND_ROW_PX = 22  # height of one legend row


@_drawn
def roofline_trajectory(points: pd.DataFrame, roofs: pd.DataFrame,
                        title: str = "Roofline trajectory (one arrow per step)") -> dict:
    """One panel per memory level (shared memory, L1, L2, DRAM; a level no version has is left
    out), log-log: the roofs of the tensor paths used
    (``Migration.roofs``) and one point per version joined by arrows (``Migration.roofline``)."""
    have = set(points.dropna(subset=["intensity"])["level"]) if len(points) else set()
    levels = [lv for lv in LEVEL_TITLES if lv in have] or list(LEVEL_TITLES)
    layout, refs = _grid(1, len(levels), [LEVEL_TITLES[lv] for lv in levels], horizontal_spacing=0.06)
    data = []
    dashes = ["solid", "dash", "dot", "dashdot"]
    shown: set = set()  # versions already in the legend
    rank = {v: i for i, v in enumerate(dict.fromkeys(points["version"]))} if len(points) else {}  # ladder order:
    # a version's colour (the same in every panel) and its place in the legend
    for col, lv in enumerate(levels, start=1):
        ref = refs[0][col - 1]
        r = roofs[roofs["level"] == lv]
        for i, (path, sub) in enumerate(r.groupby("path", sort=False, dropna=False)):
            data.append({"type": "scatter", "x": sub["intensity"], "y": sub["tflops"], "mode": "lines",
                         "line": {"color": "#555555", "dash": dashes[i % len(dashes)], "width": 1.5},
                         "name": f"roof ({path})", "legendgroup": f"roof-{path}", "showlegend": col == 1,
                         "legendrank": 50,
                         "hovertemplate": "roof " + str(path) + ": %{y:.0f} TFLOPS at %{x:.3g} FLOP/B<extra></extra>",
                         **ref})
        p = points[(points["level"] == lv)].dropna(subset=["intensity", "tflops"])
        p = p[(p["intensity"] > 0) & (p["tflops"] > 0)]
        for v, one in p.groupby("version", sort=False):  # no text beside the points: hover + one legend entry each
            data.append({"type": "scatter", "x": one["intensity"], "y": one["tflops"], "mode": "markers",
                         "marker": {"size": 10, "color": _ROOF_PALETTE[rank.get(v, 0) % len(_ROOF_PALETTE)],
                                    "line": {"width": 1, "color": "#ffffff"}},
                         "name": str(v), "legendgroup": f"v-{v}", "showlegend": v not in shown,
                         "legendrank": 100 + rank.get(v, 0),
                         "hovertemplate": f"{v}: " + "%{y:.0f} TFLOPS at %{x:.3g} FLOP/B<extra></extra>", **ref})
            shown.add(v)
        xs, ys = list(p["intensity"]), list(p["tflops"])
        axis = "" if col == 1 else str(col)
        for i in range(1, len(xs)):
            layout["annotations"].append({
                "x": _log(xs[i]), "y": _log(ys[i]), "ax": _log(xs[i - 1]), "ay": _log(ys[i - 1]),
                "xref": f"x{axis}", "yref": f"y{axis}", "axref": f"x{axis}", "ayref": f"y{axis}",
                "showarrow": True, "arrowhead": 3, "arrowsize": 1.2, "arrowwidth": 1.5, "arrowcolor": "#d62728",
                "text": ""})
        layout[f"xaxis{axis}"].update(type="log", title={"text": "FLOP / byte"})
        layout[f"yaxis{axis}"]["type"] = "log"
    layout["yaxis"]["title"] = {"text": "TFLOPS"}
    # The legend (one entry per version and roof) sits at the figure's bottom edge in a margin sized for its rows
    # (ROOF_LEGEND_PER_ROW entries a row, a conservative count for a ~1,000 px wide page): anchored below the plot
    # in paper units instead, a 40-version ladder's legend took plotly's automargin, shrank the plot area and rose
    # into the axis titles (tests/test_roofline_browser.py).
    entries = len(shown) + int(roofs["path"].nunique(dropna=False)) if len(roofs) else len(shown)
    rows = max(1, math.ceil(entries / ROOF_LEGEND_PER_ROW))
    bottom = 80 + ROOF_LEGEND_ROW_PX * rows
    layout.update(_layout(title, height=400 + bottom, margin={"b": bottom},
                          legend={"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0,
                                  "xanchor": "left", "x": 0}))
    return {"data": data, "layout": layout}


def _empty(title: str, message: str) -> dict:
    """A figure with no trace that says why (``message``) in the middle."""
    return {"data": [], "layout": _layout(
        title, annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper",
                             "yref": "paper"}],
        height=200, xaxis={"visible": False}, yaxis={"visible": False})}


# --- timelines and regions ----------------------------------------------------------------------

REGION_COLORS = {
    "load_q": "#9ecae1", "load_kv": "#3182bd", "qk": "#e6550d", "softmax": "#31a354", "pv": "#fd8d3c",
    "epilogue": "#756bb1", "sync": "#636363", "other": "#d9d9d9",
    "global_load": "#3182bd", "shared_staging": "#9ecae1", "mma": "#e6550d", "elementwise": "#31a354",
    "reduction": "#fd8d3c", "store": "#756bb1",
}
PHASE_COLORS = {"ramp": "#fdae6b", "steady": "#74c476", "tail": "#de2d26"}


@_drawn
def timeline_curves(timelines: pd.DataFrame, series: str = "tensor_pct",
                    title: str = "Tensor pipe over the kernel's time (PM sampling, % of peak)") -> dict:
    """One line per version of ``series`` over normalised time. ``Migration.timelines`` (version, x,
    series, value)."""
    sub = timelines[timelines["series"] == series] if len(timelines) else timelines
    if not len(sub):
        return _empty(title, "no PM sampling in these reports (section WhowaitsPmSampling)")
    data = [{"type": "scatter", "x": 100 * g["x"], "y": g["value"], "mode": "lines", "name": str(version),
             "hovertemplate": f"{version}" + ": %{y:.1f} at %{x:.0f}% of the time<extra></extra>"}
            for version, g in sub.groupby("version", sort=False)]
    return {"data": data, "layout": _layout(
        title, xaxis=_axis_title("time (% of the kernel's duration)"),
        yaxis=_axis_title("% of peak" if series.endswith("_pct") else series), height=380)}


@_drawn
def warp_state_curves(timelines: pd.DataFrame,
                      title: str = "Warp states over the kernel's time (share of sampled warps)") -> dict:
    """Stacked areas of the warp-state shares over normalised time, one panel per version that has them."""
    sub = timelines[timelines["series"].str.startswith("warps_")] if len(timelines) else timelines
    if not len(sub):
        return _empty(title, "no warp states over time in these reports (section WhowaitsPmWarpStates)")
    versions = list(dict.fromkeys(sub["version"]))
    layout, refs = _grid(len(versions), 1, versions, vertical_spacing=min(0.08, 0.3 / max(1, len(versions))),
                         shared_xaxes=True)
    data = []
    shown = set()
    for i, v in enumerate(versions, start=1):
        g = sub[sub["version"] == v]
        for series, h in g.groupby("series", sort=False):
            reason = series[len("warps_"):]
            data.append({"type": "scatter", "x": 100 * h["x"], "y": 100 * h["value"], "mode": "lines",
                         "stackgroup": f"s{i}", "name": reason, "legendgroup": reason,
                         "showlegend": reason not in shown, "line": {"width": 0.5, "color": _color(reason)},
                         "hovertemplate": f"{v} · {reason}" + ": %{y:.0f}%<extra></extra>", **refs[i - 1][0]})
            shown.add(reason)
    bottom = "xaxis" + refs[-1][0]["xaxis"][1:]
    layout[bottom]["title"] = {"text": "time (% of the kernel's duration)"}
    layout.update(_layout(title, height=max(320, 170 * len(versions))))
    return {"data": data, "layout": layout}


@_drawn
def phase_bars(table: pd.DataFrame, title: str = "Ramp-up, steady state and tail (share of the kernel's time)") -> dict:
    """Stacked horizontal bars of the phase shares per version. ``Migration.table`` (ramp_share, …)."""
    if "tail_share" not in table or not table["tail_share"].notna().any():
        return _empty(title, "no PM sampling in these reports (section WhowaitsPmSampling)")
    df = table[table["tail_share"].notna()]
    data = [{"type": "bar", "y": df["version"], "x": 100 * df[f"{ph}_share"], "name": ph, "orientation": "h",
             "marker": {"color": PHASE_COLORS[ph]}, "hovertemplate": "%{y} · " + ph + ": %{x:.1f}%<extra></extra>"}
            for ph in ("ramp", "steady", "tail")]
    return {"data": data, "layout": _layout(title, barmode="stack", xaxis=_axis_title("% of the kernel's time"),
                                            height=max(240, 34 * len(df) + 140), margin={"l": 170},
                                            yaxis={"autorange": "reversed"})}


@_drawn
def region_bars(regions: pd.DataFrame, title: str = "Where the samples sit: source regions per version") -> dict:
    """Stacked bars of the region shares per version (declared or inferred, named in the hover)."""
    if not len(regions):
        return _empty(title, "no per-PC samples")
    versions = list(dict.fromkeys(regions["version"]))
    src = regions.groupby("version")["source"].agg(lambda s: "/".join(sorted(set(s)))).reindex(versions)
    data = []
    for name in dict.fromkeys(regions["region"]):
        sub = regions[regions["region"] == name].set_index("version").reindex(versions)
        data.append({"type": "bar", "x": [f"{v} ({src[v][0]})" for v in versions], "y": 100 * sub["share"].fillna(0),
                     "name": name, "marker": {"color": REGION_COLORS.get(name, "#444444")},
                     "hovertemplate": "%{x} · " + name + ": %{y:.1f}%<extra></extra>"})
    return {"data": data, "layout": _layout(title + " (d = declared, i = inferred)", barmode="stack",
                                            yaxis=_axis_title("share of samples (%)"), height=440)}


@_drawn
def role_graph(edges: list[dict], title: str = "Who waits on whom between warp roles", inferred: bool = False,
               note: str = "") -> dict:
    """The role wait graph of one version: an arrow ``waiter → releaser`` (the waiter waits on the
    releaser) per pair, its width the summed share of the launch's samples, labelled with each barrier
    and its share; a dashed arrow where every edge of the pair is ``inferred``. ``edges``: dicts with
    waiter, barrier, releaser, share, inferred (a summary's ``role_edges``). ``inferred`` marks the whole
    graph (no source: roles and pairings read from the SASS alone, e.g. cuDNN) in the title."""
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
    data, annotations = [], []
    top = max(sum(e["share"] for e in es) for es in pairs.values())
    for (w, r), es in sorted(pairs.items(), key=lambda kv: -sum(e["share"] for e in kv[1])):
        share = sum(e["share"] for e in es)
        x0, y0 = pos[w]
        x1, y1 = pos[r]
        if (x0, y0) == (x1, y1):
            continue
        dashed = all(e.get("inferred") for e in es)
        width = 1.5 + 8.0 * share / top
        color = "#1f77b4" if not dashed else "#ff7f0e"
        label = "<br>".join(f"{e['barrier']}: {100 * e['share']:.1f}%{' (inferred)' if e.get('inferred') else ''}"
                            for e in sorted(es, key=lambda e: -e["share"]))
        data.append({"type": "scatter", "x": [x0, x1], "y": [y0, y1], "mode": "lines", "hoverinfo": "text",
                     "hovertext": label, "line": {"width": width, "color": color,
                                                  "dash": "dash" if dashed else "solid"}, "showlegend": False})
        annotations.append({"x": x1, "y": y1, "ax": x0, "ay": y0, "xref": "x", "yref": "y", "axref": "x",
                            "ayref": "y", "text": "", "showarrow": True, "arrowhead": 3, "arrowsize": 1,
                            "arrowwidth": max(1.0, width / 3), "arrowcolor": color, "standoff": 14,
                            "startstandoff": 14})
        annotations.append({"x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "text": label, "showarrow": False,
                            "font": {"size": 10}, "bgcolor": "rgba(255,255,255,0.8)"})
    data.append({"type": "scatter", "x": [pos[n][0] for n in nodes], "y": [pos[n][1] for n in nodes],
                 "mode": "markers+text", "text": nodes,
                 "textposition": ["middle left" if pos[n][0] == 0 else "middle right" for n in nodes],
                 "marker": {"size": 18, "color": ["#2ca02c" if n in waiters else "#7f7f7f" for n in nodes]},
                 "hoverinfo": "text", "showlegend": False})
    if note:
        annotations.append({"text": note, "x": 0.5, "y": -0.04, "xref": "paper", "yref": "paper",
                            "showarrow": False, "font": {"size": 10}})
    return {"data": data, "layout": _layout(
        title, height=max(260, 90 * max(len(waiters), len(others)) + 140),
        xaxis={"visible": False, "range": [-0.6, 1.6]}, yaxis={"visible": False, "range": [-0.05, 1.05]},
        margin={"l": 20, "r": 20}, annotations=annotations)}
