"""The standalone HTML report: one file, plotly.js inlined, readable offline.

Sections: the confound guard's warnings, the ladder table, the migration (stall shares per
version, the top waiters' path with one sentence per step, the roofline trajectory), each
version's breakdown (stall reasons, who waits on whom, top instructions) and the diff of every
pair of consecutive versions. Rendering only: it takes a :class:`~profiler.compare.Migration`,
the loaded versions and their consecutive :class:`~profiler.compare.Diff` s, and draws them with
:mod:`profiler.plots`. :func:`write_html` writes atomically (temp file + rename).

The page records every JavaScript error and ``console.error`` on ``<html data-errors=N>`` so a
headless browser's DOM dump shows whether it rendered cleanly.
"""

from __future__ import annotations

import html as _html
import os
import re
from collections.abc import Set as AbstractSet
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from profiler.errors import WhowaitsError
from profiler.io import write_atomic

_ERROR_HOOK = """<script>
(function () {
  var errs = [];
  function note(msg) {
    errs.push(String(msg));
    document.documentElement.setAttribute('data-errors', String(errs.length));
    document.documentElement.setAttribute('data-first-error', errs[0].slice(0, 300));
  }
  window.addEventListener('error', function (e) { note(e.message || 'error'); });
  window.addEventListener('unhandledrejection', function (e) { note('unhandled rejection: ' + e.reason); });
  var ce = console.error;
  console.error = function () { note(Array.prototype.join.call(arguments, ' ')); ce.apply(console, arguments); };
})();
</script>"""

_DONE_HOOK = """<script>
window.addEventListener('load', function () {
  var n = document.querySelectorAll('.js-plotly-plot .main-svg').length;
  document.documentElement.setAttribute('data-main-svgs', String(n));
});
</script>"""

_CSS = """
details.fold summary { cursor: pointer; } details.fold[open] summary { color: #666; }
td details.fold { max-width: 28rem; }
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #222; padding: 0 1rem; }
h1 { margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.5rem; }
.meta { color: #666; font-size: .9rem; }
table { border-collapse: collapse; font-size: .88rem; margin: .6rem 0; }
th, td { border-bottom: 1px solid #eee; padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: #f6f6f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.warn { background: #fff4e5; border-left: 4px solid #f0a020; padding: .5rem .8rem; margin: .4rem 0; }
.note { color: #666; font-size: .85rem; }
.verdict { font-size: 1.05rem; background: #eef6ff; border-left: 4px solid #2171b5; padding: .5rem .8rem; }
.noise { color: #999; } .sig { font-weight: 600; }
nav a { margin-right: .8rem; }
"""


def _e(x) -> str:
    return _html.escape("" if x is None else str(x))


def _anchor(label) -> str:
    """A label as an element id / link target: characters other than letters, digits, ``_ . -`` become
    ``-`` (a user's label may hold spaces: ``4 stages``)."""
    return re.sub(r"[^A-Za-z0-9_.\-]", "-", str(label))


def _num(x, fmt: str = "{:.3g}") -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "—"
    if isinstance(x, (int, float)):
        return fmt.format(x)
    return _e(x)


def _pct(x) -> str:
    return _num(None if x is None else 100 * x, "{:.1f}%")


def _table(headers: list[str], rows: list[list[str]], num_cols: AbstractSet[int] = frozenset()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in num_cols else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: the page-level object that holds each shared plotly template once (see :func:`_fig`)
_TEMPLATES_JS = "window.WHOWAITS_TEMPLATES"
_FIG_CONFIG = '{"displaylogo": false, "responsive": true}'


def _json(obj) -> str:
    """``obj`` as plotly writes a figure's JSON (its encoder writes ``<``, ``>`` and ``/`` as ``\\u`` escapes,
    so a label holding ``</script>`` cannot end the script it sits in)."""
    from plotly.io.json import to_json_plotly  # noqa: PLC0415

    return to_json_plotly(obj)


def _px(value, default: str) -> str:
    """A div size as ``pio.to_html`` writes it: a number in px, anything else as given."""
    if value is None:
        return default
    try:
        float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{value}px"


def _templates_script() -> str:
    """The house template, once per page (every figure's layout refers to it): 6.6 kB of JSON that
    ``pio.to_html`` wrote into each figure; the committed ladder's page (114 figures) went from 6.36 to
    5.60 MB (``whowaits migration --html``, 2026-12-01)."""
    from profiler.plots import _TEMPLATE, _template  # noqa: PLC0415

    return f"<script type='text/javascript'>{_TEMPLATES_JS} = {{{_json(_TEMPLATE)}: {_json(_template(_TEMPLATE))}}};</script>"


def _fig(spec: dict) -> str:
    """One figure's ``<div>`` and its ``Plotly.newPlot`` script (plotly.js itself and the house template are in
    the page's head: :func:`render_report`). ``spec``: a plain figure dict of :mod:`profiler.plots`
    (``plots.<figure>.spec(...)``), serialised without plotly's property validation (see :mod:`profiler.plots`),
    which is what drawing a page cost. The markup is ``pio.to_html``'s (``full_html=False``, no plotly.js), but a
    layout in the house template names it instead of carrying a copy."""
    import uuid  # noqa: PLC0415

    from profiler.plots import _TEMPLATE, page_dict  # noqa: PLC0415

    fig = page_dict(spec)
    layout = fig["layout"]
    template = layout.get("template")
    shared = (spec.get("layout") or {}).get("template") == _TEMPLATE  # page_dict put _template(_TEMPLATE) there
    tlayout = (template or {}).get("layout", {}) if isinstance(template, dict) else {}
    width = _px(layout.get("width", tlayout.get("width")), "100%")
    height = _px(layout.get("height", tlayout.get("height")), "100%")
    if shared:
        layout = {k: v for k, v in layout.items() if k != "template"}
        layout_js = f"Object.assign({{template: {_TEMPLATES_JS}[{_json(_TEMPLATE)}]}}, {_json(layout)})"
    else:
        layout_js = _json(layout)
    div = str(uuid.uuid4())
    return (f'<div style="height:{height}; width:{width};"><div id="{div}" class="plotly-graph-div" '
            f'style="height:{height}; width:{width};"></div><script>if (document.getElementById("{div}")) '
            f'{{Plotly.newPlot("{div}", {_json(fig["data"])}, {layout_js}, {_FIG_CONFIG});}}</script></div>')


def _warnings(warnings: list[dict]) -> str:
    return "".join(f"<div class='warn'>⚠ {_e(w['message'])}</div>" for w in warnings)


def _one_line(text: str, limit: int = 64) -> str:
    """The first sentence of ``text`` when it fits ``limit`` characters, else its first words up to it, with '…'."""
    t = " ".join(str(text).split())
    for stop in (". ", "; "):
        i = t.find(stop)
        if 0 < i < limit:
            return t[: i + 1].rstrip(";") + ("…" if i + 2 < len(t) else "")
    if len(t) <= limit:
        return t
    return t[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _fold(text) -> str:
    """A table cell of long text: one line, the whole text folded under it (``<details>``); short text as is."""
    if not isinstance(text, str) or not text.strip():
        return _e(text)
    line = _one_line(text)
    if line == " ".join(text.split()):
        return _e(text)
    return f"<details class='fold'><summary>{_e(line)}</summary>{_e(text)}</details>"


def _ladder_table(m) -> str:
    from profiler.compare.diff import fmt_ns  # noqa: PLC0415

    rows = []
    recs = m.table.to_dict(orient="records")
    extra = [k for k in ("gbps", "l2_read_fanout", "hypothesis", "verdict")
             if any((isinstance(r.get(k), str) and r.get(k)) or (isinstance(r.get(k), float) and r[k] == r[k])
                    for r in recs)]
    beside = set(m.steps["dst"][m.steps["beside"]]) if "beside" in m.steps and len(m.steps) else set()
    above = [None if r["version"] in beside else v for r, v in zip(recs, [None] + [r["version"] for r in recs[:-1]])]
    for r, prev in zip(recs, above):
        top = (f"{_e(r['top_class'])}·{_e(r['top_reason'])}" if r.get("top_class")
               else f"— <span class='note'>{_e(r.get('top_note') or 'no samples')}</span>")
        if isinstance(r.get("top_tied_with"), str):
            top += f" <span class='note'>tied with {_e(r['top_tied_with'])}</span>"
        if isinstance(r.get("top_producer"), str):
            top += f" ← {_e(r['top_producer'])}"
        if r.get("top_opcode"):
            top += f" <span class='note'>on {_e(r['top_opcode'])}</span>"
        rows.append([f"<a href='#v-{_anchor(r['version'])}'>{_e(r['version'])}</a>", _e(r.get("title")),
                     _fold(r.get("change")), _e(fmt_ns(r.get("duration_ns"))), _num(r.get("tflops"), "{:.3g}"),
                     _speedup(r, prev), top,
                     f"{_pct(r.get('top_share'))} <span class='note'>[{_pct(r.get('top_lo'))}, "
                     f"{_pct(r.get('top_hi'))}]</span>",
                     _fold(r.get("expected_bottleneck")),
                     _e(r.get("tensor_path")), _num(r.get("tensor_pipe_pct"), "{:.1f}%"), _xu_cell(r),
                     _num(r.get("tensor_roof_pct"), "{:.1f}%")]
                    + [_num(r.get(k), "{:.0f}") if k == "gbps" else _fanout_html(r) if k == "l2_read_fanout"
                       else _fold(r.get(k)) for k in extra])
    names = {"gbps": "GB/s", "l2_read_fanout": "L2 read fan-out (SMs per read)", "hypothesis": "hypothesis",
             "verdict": "verdict"}
    num = {3, 4, 5, 7, 10, 11, 12} | {13 + i for i, k in enumerate(extra) if k in ("gbps", "l2_read_fanout")}
    return _table(["version", "title", "change", "duration", "TFLOPS", "speed-up (vs the row above)", "top waiter",
                   "share [95%]",
                   "expected bottleneck", "tensor path", "tensor pipe (own peak)", "XU (MUFU) pipe",
                   "tensor roof (dense)"]
                  + [names[k] for k in extra], rows, num)


def _fanout_html(r: dict) -> str:
    """A migration row's L2 read fan-out, with the TMA multicast share where there is one; — without the counters."""
    v, mc = r.get("l2_read_fanout"), r.get("l2_read_multicast_share")
    if not isinstance(v, float) or v != v:
        return "—"
    note = (f" <span class='note'>{mc:.0%} by multicast</span>" if isinstance(mc, float) and mc == mc and mc > 0
            else "")
    return f"{v:.2f}×{note}"


def _xu_cell(r: dict) -> str:
    """A migration row's XU pipe %: ncu's counter, else the figure derived from the SASS (marked); flagged where it
    is busier than the tensor pipe (the exponential is then the nearer roof)."""
    from profiler.analyze.xu import xu_busier, xu_figure  # noqa: PLC0415

    v, source = xu_figure(r)
    cell = _num(v, "{:.1f}%")
    if source == "sass":
        cell += " <span class='note'>from SASS</span>"
    if xu_busier(r):
        cell = f"<strong>{cell}</strong> <span class='note'>&gt; tensor pipe</span>"
    return cell


def _speedup(r: dict, prev) -> str:
    """The row's speed-up against the row above, or ``0.64x vs v12_…`` where migration measured it against
    another version (an external subject against the ladder's top rung)."""
    x = _num(r.get("speedup_prev"), "{:.2f}x")
    vs = r.get("vs")
    if x == "—" or not isinstance(vs, str) or vs == prev:
        return x
    return f"{x} <span class='note'>vs {_e(vs)}</span>"


def _version_section(p, m, verbose: bool = False) -> str:
    from profiler import plots  # noqa: PLC0415

    s = p.summary
    label = p.label
    shares = m.stall_shares[m.stall_shares["version"] == label]
    n = sum(v for v in (s.get("stall_samples") or {}).values() if isinstance(v, (int, float)) and v == v)
    waits = pd.DataFrame(s.get("who_waits") or [], columns=["class", "reason", "samples", "share"])
    if n and len(waits):
        waits = waits.assign(share=waits["samples"] / n)
    parts = [f"<section id='v-{_anchor(label)}'><h3>{_e(label)}</h3>",
             f"<p class='meta'>kernel <code>{_e(s.get('kernel'))}</code> · {_e(p.subject.path)}"
             f"{' · ' + str(p.launches) + ' launches merged' if p.launches > 1 else ''}</p>"]
    parts.append(_fig(plots.stall_breakdown.spec(shares, title=f"{label}: stall reasons (95% intervals)")))
    parts.append(_fig(plots.who_waits_heatmap.spec(waits, title=f"{label}: who waits on whom (% of samples)")))
    from profiler.html_flow import flow_spec  # noqa: PLC0415

    parts.append(_fig(flow_spec(s, label)))
    edges = [e for e in (s.get("role_edges") or []) if e.get("samples")]
    if edges:
        parts.append(_fig(plots.role_graph.spec(
            edges, title=f"{label}: who waits on whom between warp roles (arrow: waiter → releaser, % of samples)",
            inferred=_no_source(s), note="dashed: the pairing is inferred")))
    wo = s.get("waits_on") or []
    if wo:
        rows = [[_e(f"{w['class']}·{w['reason']}"), _e(f"← {w['producer_class']} ({w['producer_opcode']})"),
                 _num(w.get("samples"), "{:,.0f}"), _pct(w.get("share"))] for w in wo[:10]]
        un = {r: v for r, v in (s.get("waits_on_unresolved") or {}).items() if v}
        note = ("<p class='note'>No producer found: "
                + ", ".join(f"{_e(r)} {_num(v, '{:,.0f}')}" for r, v in un.items()) + "</p>") if un else ""
        parts.append("<h4>Who waits on whom: scoreboard stalls by producer instruction</h4>"
                     + _table(["waiter · reason", "producer (opcode)", "samples", "share"], rows, {2, 3}) + note)
    sites = s.get("overlap") or []
    if sites:
        from profiler.analyze.overlap import config, headline  # noqa: PLC0415

        head = config()["headline_class"]
        rows = [[_e(f"{r['offset']:#06x}"), _e(f"{r['group']} N={r['pending']}"), _num(r.get("samples"), "{:,d}"),
                 _pct(r.get("share")), _e(", ".join(f"{o:#06x}" for o in r["commit_offsets"]) or "—"),
                 _num((r.get("overlap_static") or {}).get(head, 0), "{:d}"),
                 _num((r.get("overlap_static") or {}).get("HGMMA", 0) + (r.get("overlap_static") or {}).get("HMMA", 0),
                      "{:d}"),
                 _e(", ".join(f"{o:#06x} (N={n})" for o, n in zip(r["next_offsets"], r["next_pending"])) or "end"),
                 _num(r.get("between_work"), "{:,.1f}"), "<b>collapsed</b>" if r.get("collapsed") else ""]
                for r in sites]
        h = headline(sites)
        note = (f"<p class='note'>{h['collapsed']} collapsed overlap(s): a wait_group N&ge;1 has a lower wait right "
                f"behind it ({h['under']} {_e(head)} under the group it retires); those waits hold "
                f"{h['held']:,} samples ({_pct(h['held_share'])})</p>") if h["collapsed"] else ""
        parts.append("<h4>What runs while the tensor core works: async-group waits</h4>"
                     + _table(["offset", "wait", "samples", "share", "retires commit", f"{head} under",
                               "MMA under", "next wait", "work between", ""], rows, {2, 3, 5, 6, 8}) + note)
    tops = s.get("top_instructions") or []
    if tops:
        rows = [[_e(hex(t["address"]) if isinstance(t.get("address"), int) else t.get("address")),
                 f"<code>{_e(t.get('sass'))}</code>", _e(t.get("class")), _num(t.get("samples"), "{:d}"),
                 _e(t.get("top_reason"))] for t in tops[:10]]
        parts.append("<h4>Top instructions by stall samples</h4>"
                     + _table(["address", "SASS", "class", "samples", "top reason"], rows, {3}))
    from profiler.compare.gaps import gap_line  # noqa: PLC0415

    lines = gap_line(label, s, verbose=verbose)
    if lines:
        parts.append("<p class='note'>" + "<br>".join(_e(x) for x in lines) + "</p>")
    parts.append("</section>")
    return "".join(parts)


def _no_source(summary: dict) -> bool:
    """A launch whose report carries no source of ours (cuDNN, torch SDPA): its regions are inferred from
    the SASS, and so is everything the role graph says."""
    regions = summary.get("regions") or []
    return bool(regions) and all(r.get("source") == "inferred" for r in regions)


def _diff_section(d) -> str:
    from profiler import plots  # noqa: PLC0415

    rows = []
    for r in d.stalls.to_dict(orient="records"):
        if not (r["share_a"] or r["share_b"]):
            continue
        cls = "sig" if r["significant"] else "noise"
        rows.append([_e(r["reason"]), _num(r["samples_a"], "{:d}"), _num(r["samples_b"], "{:d}"),
                     _pct(r["share_a"]), _pct(r["share_b"]),
                     f"<span class='{cls}'>{_num(100 * r['delta'], '{:+.1f}')} pp</span>",
                     f"[{_num(100 * r['delta_lo'], '{:+.1f}')}, {_num(100 * r['delta_hi'], '{:+.1f}')}]",
                     "significant" if r["significant"] else "noise"])
    table = _table(["reason", f"samples {d.a}", f"samples {d.b}", f"share {d.a}", f"share {d.b}", "Δ", "interval",
                    ""], rows, {1, 2, 3, 4, 5, 6})
    return (f"<section id='d-{_anchor(d.a)}-{_anchor(d.b)}'><h3>{_e(d.a)} → {_e(d.b)}</h3>"
            + _warnings(d.warnings)
            + f"<p class='verdict'>{_e(d.verdict)}</p>" + table
            + _fig(plots.diff_deltas.spec(d.classes, key="class",
                                     title=f"{d.a} → {d.b}: change per opcode class (pp, grey = noise)"))
            + _diff_when_where(d)
            + "</section>")


def _diff_when_where(d) -> str:
    """Regions and phases of a diff, and the two timelines side by side."""
    from profiler import plots  # noqa: PLC0415

    out = []
    if len(d.regions):
        rows = []
        for r in d.regions.to_dict(orient="records"):
            cls = "sig" if r["significant"] else "noise"
            rows.append([_e(r["region"]), _pct(r["share_a"]), _pct(r["share_b"]),
                         f"<span class='{cls}'>{_num(None if r['delta'] is None else 100 * r['delta'], '{:+.1f}')} pp</span>",
                         _e(f"{r['source_a'] or '—'} / {r['source_b'] or '—'}")])
        out.append("<h4>Source regions (share of samples)</h4>"
                   + _table(["region", d.a, d.b, "Δ", "declared/inferred"], rows, {1, 2, 3}))
    if len(d.phases):
        rows = [[_e(r["phase"]), _pct(r["share_a"]), _pct(r["share_b"]),
                 _num(None if r["delta"] is None else 100 * r["delta"], "{:+.1f}") + " pp",
                 "changed" if r["significant"] else ("within 2 samples" if r["significant"] is False else "—")]
                for r in d.phases.to_dict(orient="records")]
        out.append("<h4>Phases (share of the kernel's time)</h4>"
                   + _table(["phase", d.a, d.b, "Δ", ""], rows, {1, 2, 3}))
    frames = []
    for label, tl in ((d.a, d.timeline_a), (d.b, d.timeline_b)):
        curve = (tl or {}).get("curve") or {}
        for series in ("tensor_pct",):
            for x, v in zip(curve.get("x") or [], curve.get(series) or []):
                frames.append({"version": label, "x": x, "series": series, "value": v})
        for reason, vals in (curve.get("warps") or {}).items():
            for x, v in zip(curve.get("x") or [], vals):
                frames.append({"version": label, "x": x, "series": f"warps_{reason}", "value": v})
    if frames:
        tl = pd.DataFrame(frames)
        out.append(_fig(plots.timeline_curves.spec(tl, title=f"{d.a} vs {d.b}: tensor pipe over normalised time")))
        if tl["series"].str.startswith("warps_").any():
            out.append(_fig(plots.warp_state_curves.spec(tl, title=f"{d.a} vs {d.b}: warp states over normalised time")))
    return "".join(out)


def render_report(m, profiled: list, diffs: list, title: str = "whowaits: who waits on whom, version by version",
                  verbose: bool = False) -> str:
    """The whole page as a string (see the module docstring for its sections)."""
    from plotly.offline import get_plotlyjs  # noqa: PLC0415

    from profiler import plots  # noqa: PLC0415

    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    beside = m.steps["beside"] if "beside" in m.steps else [False] * len(m.steps)
    rungs = [s for s, b in zip(m.steps["sentence"], beside) if not b]
    ext = [s for s, b in zip(m.steps["sentence"], beside) if b]
    steps = "<ol>" + ("".join(f"<li>{_e(s)}</li>" for s in rungs) or "<li>one version: no step yet</li>") + "</ol>"
    if ext:  # external subjects: set beside the top rung, not chained as steps
        steps += "<h3>Beside the top rung</h3><ul>" + "".join(f"<li>{_e(s)}</li>" for s in ext) + "</ul>"
    body = [
        f"<h1>{_e(title)}</h1>",
        f"<p class='meta'>{len(m.versions)} version(s) · generated {when} by whowaits</p>",
        "<nav><a href='#ladder'>ladder</a><a href='#migration'>migration</a><a href='#when'>when</a>"
        "<a href='#where'>where</a><a href='#versions'>versions</a>"
        "<a href='#diffs'>diffs</a></nav>",
        _warnings(m.warnings),
        "<h2 id='ladder'>Ladder</h2>", _ladder_table(m),
        "<h2 id='migration'>Migration</h2>",
        "<h3>Path of the top waiter</h3>" + steps,
        _fig(plots.migration_stalls.spec(m.stall_shares)),
        _fig(plots.waiter_path.spec(m.waiters, m.table)),
        _fig(plots.ladder_speed.spec(m.table)),
        _fig(plots.roofline_trajectory.spec(m.roofline, m.roofs)),
        "<h3 id='when'>When: timelines (PM sampling)</h3>",
        _fig(plots.timeline_curves.spec(m.timelines)),
        _fig(plots.phase_bars.spec(m.table)),
        _fig(plots.warp_state_curves.spec(m.timelines)),
        "<h3 id='where'>Where: source regions</h3>",
        _fig(plots.region_bars.spec(m.regions)),
        "".join(f"<p class='note'>{_e(n)}</p>" for n in dict.fromkeys(m.notes)),
        "<h2 id='versions'>Versions</h2>", "".join(_version_section(p, m, verbose) for p in profiled),
        "<h2 id='diffs'>Consecutive diffs</h2>",
        "".join(_diff_section(d) for d in diffs) or "<p class='note'>one version: nothing to diff.</p>",
    ]
    return ("<!DOCTYPE html>\n<html lang='en' data-errors='0'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{_CSS}</style>{_ERROR_HOOK}"
            f"<script type='text/javascript'>{get_plotlyjs()}</script>{_templates_script()}</head><body>"
            + "\n".join(body) + _DONE_HOOK + "</body></html>\n")


def check_target(path: str | os.PathLike, force: bool = False) -> Path:
    """Refuse, with one line, an HTML destination that cannot be written: a folder, an existing
    file without ``force``, a missing or unwritable folder, a name too long for the file system.
    Called before any work, so a bad ``--html`` costs nothing and leaves nothing on stdout."""
    path = Path(path)
    try:
        if path.is_dir():
            raise WhowaitsError(f"{path} is a folder; give a file name for the HTML report "
                                f"(e.g. {path / 'report.html'})")
        if path.exists() and not force:
            raise WhowaitsError(f"{path} exists; pass --force to overwrite it")
        if not path.parent.is_dir():
            raise WhowaitsError(f"folder {path.parent} does not exist")
        max_name = os.pathconf(path.parent, "PC_NAME_MAX")
    except OSError as err:
        raise WhowaitsError(f"cannot write {path}: {err.strerror or err}") from None
    if len(os.fsencode(f".{path.name}.12345678.tmp")) > max_name:
        raise WhowaitsError(f"cannot write {path}: file name too long (at most {max_name - 14} bytes here)")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise WhowaitsError(f"cannot write {path}: folder {path.parent} is not writable")
    return path


def write_html(path: str | os.PathLike, text: str, force: bool = False) -> Path:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename.
    An existing file is kept unless ``force``; every refusal is a one-line
    :class:`~profiler.errors.WhowaitsError` (see :func:`check_target`)."""
    path = check_target(path, force)
    try:
        write_atomic(path, text, mkdir=False)
    except OSError as err:  # write_atomic leaves no temporary file behind
        raise WhowaitsError(f"cannot write {path}: {err.strerror or err}") from None
    return path
