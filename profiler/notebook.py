"""What the notebooks show, and the widgets (ipywidgets) that pick it: the notebooks call these, so that
they hold no logic of their own.

- :func:`show_views`, :func:`diff_views`, :func:`migration_views`: the figures and tables of ``whowaits
  show`` / ``diff`` / ``migration`` for one choice, as a list (strings, plotly figures, DataFrames).
- :func:`pick_show`, :func:`pick_diff`, :func:`pick_migration`: the choices of the reports folder (a
  report; two versions; versions and a shape) above an ``ipywidgets.Output``; it renders the views at once
  with the first choice (so a headless run, e.g. nbclient in the test suite, executes the whole view:
  widgets need no front end to run) and again on every change. ``.result`` holds the last views.

  The views are written into the Output widget's ``outputs`` state from the kernel, never captured with
  ``with output:`` (what ``ipywidgets.interactive`` does). A capture asks the front end to route the cell's
  messages into the widget, and nbclient's stand-in front end answers every routed output with a
  ``comm_msg`` sent on the shell socket while its other coroutine awaits the ``execute_reply`` on that
  same socket; the send consumes the socket's edge-triggered wake-up, so the reply, already there, is
  only read when the cell timeout's final poll finds it (jupyter/nbclient#312): the cell "passes" after
  300 s. Written as state, the views travel on IOPub as ``comm_msg`` from the kernel and the client sends
  nothing back.
- :func:`profile_live`: profile a version now under ncu when a GPU and ncu are here, then show it; else
  say why it was skipped, without an error.

A choice the reports cannot answer (a version without a report at the shape …) shows the one-line
``whowaits: error: …`` instead of a traceback.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from profiler.errors import WhowaitsError

__all__ = ["LiveProfile", "diff_views", "migration_views", "pick_diff", "pick_migration", "pick_show",
           "profile_live", "report_choices", "show_views", "version_choices"]


# ----------------------------------------------------------------------------------------- choices
def _rdir(reports):
    from profiler.compare.subjects import reports_dir  # noqa: PLC0415

    return reports_dir(root=reports)


def report_choices(reports=None) -> list[tuple[str, str]]:
    """(``version · shape``, report path) for every report of the reports folder, ladder order."""
    from profiler.compare.subjects import REPORT_SUFFIX, known_versions, shapes_of  # noqa: PLC0415

    rdir = _rdir(reports)
    return [(f"{v} · {s}", str(rdir / v / f"{s}{REPORT_SUFFIX}")) for v in known_versions(rdir) for s in shapes_of(rdir, v)]


def version_choices(reports=None) -> list[str]:
    """Every version (folder) of the reports folder with a report, ladder order then external subjects."""
    from profiler.compare.subjects import known_versions  # noqa: PLC0415

    return known_versions(_rdir(reports))


def _shape_choices(reports=None) -> list[str]:
    from profiler.compare.subjects import shapes_of  # noqa: PLC0415

    rdir = _rdir(reports)
    return sorted({s for v in version_choices(reports) for s in shapes_of(rdir, v)})


# ------------------------------------------------------------------------------------------- views
def show_views(report: str, reports=None) -> list:
    """One report (a path or a version id): a header line, the stall breakdown, who waits on whom, the top
    instructions and the launch shape."""
    import pandas as pd  # noqa: PLC0415

    from profiler import compare, plots  # noqa: PLC0415

    (p,) = compare.load_versions([report], reports=reports)
    view = compare.migrate(profiled=[p])
    s = p.summary
    who = pd.DataFrame(s["who_waits"])
    head = (f"{p.label}: {s['kernel'][:120]} · {s['launch'].get('duration_ns', 0) / 1e3:,.1f} µs"
            if isinstance(s.get("launch"), dict) and s["launch"].get("duration_ns") else f"{p.label}: {s['kernel'][:120]}")
    return [head,
            plots.stall_breakdown(view.stall_shares[view.stall_shares.version == p.label],
                                  title=f"{p.label}: stall reasons"),
            plots.who_waits_heatmap(who, title=f"{p.label}: who waits on whom"),
            pd.DataFrame(s["top_instructions"]).head(10),
            pd.Series(s["launch"], dtype=object)]


def diff_views(a: str, b: str, shape: str | None = None, reports=None) -> list:
    """B against A: the verdict, the confound guard's warnings, the metrics, the stall shares side by side
    and their changes."""
    from profiler import compare, plots  # noqa: PLC0415

    d = compare.diff_versions(a, b, shape=shape, reports=reports)
    return [d.verdict, *[f"warning: {w['message']}" for w in d.warnings], d.metrics,
            plots.diff_shares(d.stalls, label_a=a, label_b=b, title="Stall shares (95% intervals)"),
            plots.diff_deltas(d.stalls, title=f"{a} → {b}: change per stall reason (pp)")]


def migration_views(versions: list[str] | tuple[str, ...] | None = None, shape: str | None = None, reports=None) -> list:
    """The migration across ``versions`` (None or empty: every comparable version) at ``shape``: the table,
    one sentence per step, the stall shares per version and the top waiters' path."""
    from profiler import compare, plots  # noqa: PLC0415

    m = compare.migrate(list(versions) if versions else None, shape=shape, reports=reports)
    cols = [c for c in ("version", "duration_ns", "tflops", "speedup_prev", "top_class", "top_reason", "top_share",
                        "tensor_path") if c in m.table.columns]
    return [*[f"warning: {w['message']}" for w in m.warnings], m.table[cols],
            "\n".join(f"- {s}" for s in m.steps["sentence"]) if len(m.steps) else "(one version: no step)",
            plots.migration_stalls(m.stall_shares), plots.waiter_path(m.waiters, m.table)]


# ----------------------------------------------------------------------------------------- display
def _shown(views: list) -> list:
    """Display each view in the running IPython (figures as plotly, frames as tables); nothing outside one."""
    try:
        from IPython import get_ipython  # noqa: PLC0415
        from IPython.display import display  # noqa: PLC0415
    except ImportError:
        return views
    if get_ipython() is None:
        return views
    for v in views:
        if isinstance(v, str):
            print(v)
        else:
            display(v)
    return views


def _views(make, *args, **kw) -> list:
    """``make(*args, **kw)``, or the one line ``whowaits: error: …`` for a choice the reports cannot answer."""
    try:
        return make(*args, **kw)
    except WhowaitsError as err:
        return [f"whowaits: error: {err}"]


def _render(make, *args, **kw) -> list:
    return _shown(_views(make, *args, **kw))


def _as_outputs(views: list) -> tuple[dict, ...]:
    """The views as nbformat outputs (strings as stdout, the rest through IPython's display formatter), to
    be set as an Output widget's state; nothing outside IPython (no front end to show them)."""
    try:
        from IPython import get_ipython  # noqa: PLC0415
    except ImportError:
        return ()
    ip = get_ipython()
    if ip is None:
        return ()
    outs: list[dict] = []
    for v in views:
        if isinstance(v, str):
            outs.append({"output_type": "stream", "name": "stdout", "text": v + "\n"})
        elif hasattr(v, "_ipython_display_") and hasattr(v, "_repr_mimebundle_"):
            # plotly figures display themselves (to the cell, not the widget) when formatted: take their bundle
            data = v._repr_mimebundle_(include=None, exclude=None)
            outs.append({"output_type": "display_data", "data": {"text/plain": repr(v)[:200], **data}, "metadata": {}})
        else:
            data, metadata = ip.display_formatter.format(v)
            outs.append({"output_type": "display_data", "data": data, "metadata": metadata})
    return tuple(outs)


# ------------------------------------------------------------------------------------------ pickers
def _picker(draw, **controls):
    """A VBox of ``controls`` above an Output widget that holds ``draw(**values)``; drawn now and on every
    change of a control's value. ``.result``: the last views. See the module docstring for why the views are
    set as the Output's state rather than captured."""
    import ipywidgets as w  # noqa: PLC0415

    out = w.Output()
    box = w.VBox([*controls.values(), out])
    box.add_class("whowaits-picker")

    def redraw(_change=None):
        box.result = _views(draw, **{k: c.value for k, c in controls.items()})
        out.outputs = _as_outputs(box.result)  # one state update per redraw

    for c in controls.values():
        c.observe(redraw, names="value")
    redraw()
    return box


def pick_show(reports=None, report: str | None = None):
    """A drop-down of every report; shows the chosen one (:func:`show_views`). ``report``: the first choice."""
    import ipywidgets as w  # noqa: PLC0415

    choices = report_choices(reports)
    if not choices:
        raise WhowaitsError(f"no reports in {_rdir(reports)}")
    values = [c[1] for c in choices]
    first = next((v for v in values if report and (v == report or Path(v).parent.name == report)), values[0])
    pick = w.Dropdown(options=choices, value=first, description="report", layout=w.Layout(width="60%"))
    return _picker(lambda report: show_views(report, reports=reports), report=pick)


def pick_diff(reports=None, a: str | None = None, b: str | None = None):
    """Two drop-downs of versions (A, the baseline; B); diffs B against A (:func:`diff_views`)."""
    import ipywidgets as w  # noqa: PLC0415

    vs = version_choices(reports)
    if len(vs) < 2:
        raise WhowaitsError(f"diff needs two versions with reports in {_rdir(reports)}")
    da = w.Dropdown(options=vs, value=a if a in vs else vs[0], description="A")
    db = w.Dropdown(options=vs, value=b if b in vs else vs[1], description="B")
    return _picker(lambda a, b: diff_views(a, b, reports=reports), a=da, b=db)


def pick_migration(reports=None, versions: list[str] | None = None, shape: str | None = None):
    """A multiple choice of versions (default: the ones ``whowaits migration`` takes) and a shape
    drop-down; the migration across the chosen ones (:func:`migration_views`)."""
    import ipywidgets as w  # noqa: PLC0415

    from profiler.compare.subjects import resolve_all  # noqa: PLC0415

    vs = version_choices(reports)
    shapes = _shape_choices(reports)
    if not vs or not shapes:
        raise WhowaitsError(f"no reports in {_rdir(reports)}")
    default = versions or [s.version or s.label for s in resolve_all(shape=shape, rdir=_rdir(reports), omitted=[])]
    sel = w.SelectMultiple(options=vs, value=[v for v in default if v in vs], description="versions", rows=min(12, len(vs)))
    first = shape if shape in shapes else None
    if first is None:
        from collections import Counter  # noqa: PLC0415

        from profiler.compare.subjects import shapes_of  # noqa: PLC0415

        counts = Counter(s for v in sel.value for s in shapes_of(_rdir(reports), v))
        first = counts.most_common(1)[0][0] if counts else shapes[0]
    sh = w.Dropdown(options=shapes, value=first, description="shape")
    return _picker(lambda versions, shape: migration_views(versions, shape, reports=reports), versions=sel, shape=sh)


# ---------------------------------------------------------------------------------------- live
@dataclass
class LiveProfile:
    """What :func:`profile_live` did: ``report`` written (and ``views`` shown), or ``skipped`` saying why."""

    version: str
    report: Path | None = None
    skipped: str | None = None
    views: list | None = None


def profile_live(version: str, shape: str | None = None, out: str | Path | None = None) -> LiveProfile:
    """Profile ``version`` now (one ncu session, ``--set whowaits``) into ``out`` (default: a temporary
    folder), then show it (:func:`show_views`). Without a GPU or without ncu it profiles nothing and says so
    (``skipped``); a failed session is reported the same way, in one line."""
    from profiler import collect  # noqa: PLC0415

    try:
        collect.find_ncu()
        name, _driver = collect.gpu_info()
    except WhowaitsError as err:
        return _said(LiveProfile(version, skipped=f"skipped: {err}"))
    if shutil.which("nvidia-smi") is None or name is None:
        return _said(LiveProfile(version, skipped="skipped: no NVIDIA GPU here (nvidia-smi not found)"))
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="whowaits-live-"))
    try:
        session = collect.plan_versions([version], shape or collect.DEFAULT_SHAPE)
        result = collect.run_session(session, out_root=out, force=True)
    except WhowaitsError as err:
        return _said(LiveProfile(version, skipped=f"not profiled: {err}"))
    if result.failures:
        return _said(LiveProfile(version, skipped=f"not profiled: {result.failures[0].error}"))
    report = result.results[0].report
    live = LiveProfile(version, report=report)
    live.views = _render(show_views, str(report))
    return live


def _said(live: LiveProfile) -> LiveProfile:
    _shown([live.skipped])
    return live
