"""Who waits on whom as a flow, for the HTML report (and notebooks): a plotly Sankey per version.

Left, the producers: the instruction a scoreboard stall waits on (its base opcode, e.g. ``LDSM``, ``SYNCS``,
``LDGSTS``; :func:`profiler.analyze.waits_on`). Right, the waiters: the stalled instruction's class and
reason (``HMMA·short_scoreboard``). A link's width is its share of all the version's stall samples, so
flows of two versions read on one scale. Samples whose producer was not found flow from ``no producer
found``. The ``MAX_LINKS`` heaviest links of at least ``MIN_SHARE`` are drawn, the rest merged into ``other
producers`` (into their waiter when it is drawn, else into ``other waiters``). Stalls that wait on no instruction's result (``wait``,
``barrier``, throttles) are not flows: the title says what share of the samples the flows cover, and the
heat map beside it has them all.

Drawing only: it reads the summary's ``waits_on``, ``waits_on_unresolved`` and ``stall_samples``.
"""

from __future__ import annotations

from profiler.plots import _color, _drawn, _empty

MAX_LINKS = 10
MIN_SHARE = 0.001  # a link under 0.1% of the samples joins "other producers"; merged ones under 0.05% are left out
NO_PRODUCER = "no producer found"
OTHER_PRODUCERS = "other producers"
OTHER_WAITERS = "other waiters"
_PAD = 22  # px between nodes: more than a label's height, so labels of neighbouring nodes never touch


def _total(summary: dict) -> float:
    vals = (summary.get("stall_samples") or {}).values()
    return float(sum(v for v in vals if isinstance(v, (int, float)) and v == v))


def flow_links(summary: dict, max_links: int = MAX_LINKS) -> list[dict]:
    """The flow's links: ``producer``, ``waiter`` (class·reason), ``reason``, ``samples``, ``share`` (of all
    stall samples), heaviest first; at most ``max_links`` plus the merged rest and the unresolved ones."""
    total = _total(summary)
    if not total:
        return []
    agg: dict[tuple[str, str, str], float] = {}
    for w in summary.get("waits_on") or []:
        key = (str(w.get("producer_opcode") or w.get("producer_class")), f"{w['class']}·{w['reason']}", w["reason"])
        agg[key] = agg.get(key, 0.0) + float(w.get("samples") or 0)
    ranked = sorted(((k, v) for k, v in agg.items() if v > 0), key=lambda kv: -kv[1])
    kept = [kv for kv in ranked[:max_links] if kv[1] >= MIN_SHARE * total]
    rest = ranked[len(kept):]
    drawn_waiters = {k[1] for k, _ in kept}
    merged: dict[tuple[str, str, str], float] = {}
    for (_p, waiter, reason), v in rest:
        key = (OTHER_PRODUCERS, waiter, reason) if waiter in drawn_waiters else (OTHER_PRODUCERS, OTHER_WAITERS, "")
        merged[key] = merged.get(key, 0.0) + v
    unresolved = [((NO_PRODUCER, f"any·{r}", r), float(v)) for r, v in (summary.get("waits_on_unresolved") or {}).items()
                  if isinstance(v, (int, float)) and v > 0]
    small = [kv for kv in [*sorted(merged.items(), key=lambda kv: -kv[1]), *unresolved] if kv[1] >= 0.0005 * total]
    return [{"producer": p, "waiter": w, "reason": r, "samples": v, "share": v / total} for (p, w, r), v in [*kept, *small]]


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    return f"rgba({int(h[0:2], 16)},{int(h[2:4], 16)},{int(h[4:6], 16)},{alpha})"


@_drawn
def who_waits_flow(summary: dict, title: str = "Who waits on whom", max_links: int = MAX_LINKS,
                   pad: int = _PAD) -> dict:
    """The Sankey of :func:`flow_links`: producers left, waiters (class·reason) right, widths in % of all
    stall samples; hover gives samples and shares. An empty figure that says why when there is no flow.
    A ``go.Figure``; ``who_waits_flow.spec`` gives the plain figure dict (:mod:`profiler.plots`)."""
    links = flow_links(summary, max_links=max_links)
    if not links:
        return _empty(title, "no scoreboard stall with a producer instruction")
    covered = sum(ln["share"] for ln in links)
    left = list(dict.fromkeys(ln["producer"] for ln in links))
    right = list(dict.fromkeys(ln["waiter"] for ln in links))
    out_share = {p: sum(ln["share"] for ln in links if ln["producer"] == p) for p in left}
    in_share = {w: sum(ln["share"] for ln in links if ln["waiter"] == w) for w in right}
    labels = [f"{p} {100 * out_share[p]:.1f}%" for p in left] + [f"{w} {100 * in_share[w]:.1f}%" for w in right]
    colors = ["#9e9e9e" if p in (NO_PRODUCER, OTHER_PRODUCERS) else "#4a6fa5" for p in left]
    colors += [_color(next(ln["reason"] for ln in links if ln["waiter"] == w)) if w != OTHER_WAITERS else "#9e9e9e"
               for w in right]
    idx = {("p", p): i for i, p in enumerate(left)} | {("w", w): len(left) + i for i, w in enumerate(right)}
    sankey = {
        "type": "sankey", "arrangement": "fixed",
        "node": {"label": labels, "color": colors, "pad": pad, "thickness": 14, "line": {"width": 0},
                 "hovertemplate": "%{label} of all stall samples<extra></extra>"},
        "link": {"source": [idx[("p", ln["producer"])] for ln in links],
                 "target": [idx[("w", ln["waiter"])] for ln in links],
                 "value": [100 * ln["share"] for ln in links],
                 "color": [_rgba(_color(ln["reason"]), 0.45) if ln["reason"] else "rgba(158,158,158,0.4)"
                           for ln in links],
                 "customdata": [[ln["producer"], ln["waiter"], ln["samples"]] for ln in links],
                 "hovertemplate": "%{customdata[1]} waits on %{customdata[0]}: %{value:.1f}% of stall samples "
                                  "(%{customdata[2]:,.0f})<extra></extra>"}}
    n = max(len(left), len(right))
    return {"data": [sankey], "layout": {
        "template": "plotly_white", "font": {"size": 12},
        "title": {"text": f"{title}<br><sup>producer instruction → waiting class·reason; the flows are the "
                          f"scoreboard stalls, {100 * covered:.1f}% of all stall samples</sup>"},
        "height": max(280, (14 + pad) * n + 170), "margin": {"l": 20, "r": 20, "t": 90, "b": 20}}}


def flow_spec(summary: dict, label: str) -> dict:
    """The flow figure of one version, as the HTML report embeds it (:func:`profiler.html._fig` draws it)."""
    return who_waits_flow.spec(summary, title=f"{label}: who waits on whom, as a flow")
