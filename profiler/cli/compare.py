"""`whowaits diff`, `whowaits migration` and `whowaits report`: thin renderers over
:mod:`profiler.compare` (computation), :mod:`profiler.plots` and :mod:`profiler.html`."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import List, Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app, console

SHAPE_OPTION = typer.Option(None, "--shape", help="Shape key (b1_h64_s1024_d128_fp16); default: the one all have.")
KERNEL_OPTION = typer.Option(None, "--kernel", "-k",
                             help="Kernel-name regex; once for all reports or once per report, in order.")
ALL_SHAPE_OPTION = typer.Option(None, "--shape", help="Shape key; default: the one all named versions have, "
                                                      "or with no versions named, the one most versions have.")
REPORTS_OPTION = typer.Option(None, "--reports", help="Folder of version folders (default: reports/h200).")
LABEL_OPTION = typer.Option(None, "--label", "-l",
                            help="Row name, once per version in order (default: the shortest distinct part "
                                 "of the report names).")
PROBLEM_FLOPS_OPTION = typer.Option(None, "--problem-flops", help="FLOPs of one call, the same problem for every "
                                    "version (fills the TFLOPS column; a series file's or sidecar's own value wins).")
PROBLEM_BYTES_OPTION = typer.Option(None, "--problem-bytes", help="Bytes one call must move, for every version "
                                    "(fills a GB/s column).")
VERBOSE_OPTION = typer.Option(False, "--verbose", "-v",
                              help="List every field a report lacks (default: one line per report).")
FROM_STORE_OPTION = typer.Option(None, "--from-store", help="Take the reports from the store (`whowaits index`): an SQL "
                                                          "WHERE clause over `launches`, e.g. \"gpu = 'h200' AND shape = "
                                                          "'b1_h64_s1024_d128_fp16'\".")
STORE_DIR_OPTION = typer.Option(None, "--store", help="With --from-store: the store folder (default: ./.whowaits-store).")


def _from_store(where: str, names, store, kernels):
    """Profiled subjects chosen by the store's rows (ladder order), loaded like any others."""
    from profiler import store as st  # noqa: PLC0415
    from profiler.compare import load_many  # noqa: PLC0415

    return load_many(st.subjects(where, names=list(names) if names else None, store=store),
                     kernels=list(kernels) if kernels else None)


def _console():
    return console(150)


def _warn_stderr(warnings: list[dict]) -> None:
    for w in warnings:
        print(f"whowaits: warning: {w['message']}", file=sys.stderr)


def _pct(x, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}%"


def _fanout_cell(r: dict) -> str:
    """A migration row's L2 read fan-out (SMs served per L2 read for the SMs), with the share of the delivered bytes
    that came by TMA multicast where there is one; — without the counters."""
    v = r.get("l2_read_fanout")
    if not isinstance(v, float) or v != v:
        return "—"
    mc = r.get("l2_read_multicast_share")
    return f"{v:.2f}×" + (f" ({mc:.0%} by multicast)" if isinstance(mc, float) and mc == mc and mc > 0 else "")


def _num(x, fmt: str = "{:.3g}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return fmt.format(x) if isinstance(x, (int, float)) else str(x)


def _ratio_text(x) -> str:
    from profiler.compare.stats import fmt_ratio  # noqa: PLC0415

    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt_ratio(x)


def _share_table(title: str, df, keys: list[str], a: str, b: str, limit: int | None = None):
    from rich.table import Table  # noqa: PLC0415

    t = Table(title=title, title_justify="left")
    for k in keys:
        t.add_column(k, no_wrap=True)
    for c in ("samples A", "samples B", "share A", "share B", "Δ pp", "Δ interval (pp)"):
        t.add_column(c, justify="right")
    t.add_column("")
    rows = df[(df["share_a"] > 0) | (df["share_b"] > 0)]
    shown = rows.head(limit) if limit else rows
    for r in shown.to_dict(orient="records"):
        sig = bool(r["significant"])
        t.add_row(*[str(r[k]) for k in keys], str(r["samples_a"]), str(r["samples_b"]), _pct(r["share_a"]),
                  _pct(r["share_b"]), ("[bold]" if sig else "[dim]") + _pct(r["delta"], True),
                  f"[{_pct(r['delta_lo'], True)}, {_pct(r['delta_hi'], True)}]",
                  "[bold]significant" if sig else "[dim]noise")
    if limit and len(rows) > limit:
        t.caption = f"{len(rows) - limit} smaller rows not shown (--format json/csv has them all)"
    return t


def _xu_cell(r: dict) -> str:
    """A migration row's XU pipe %: ncu's counter, else the SASS-derived figure marked *; yellow where it is busier
    than the tensor pipe."""
    from profiler.analyze.xu import xu_busier, xu_figure  # noqa: PLC0415

    v, source = xu_figure(r)
    cell = _num(v, "{:.1f}%") + ("*" if source == "sass" else "")
    return f"[yellow]{cell}[/yellow]" if xu_busier(r) else cell


def _render_diff(d, console) -> None:
    from rich.panel import Panel  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from profiler.compare.diff import fmt_ns  # noqa: PLC0415

    for w in d.warnings:
        console.print(Panel(w["message"], title="confound", border_style="yellow"))
    console.print(f"[bold]A[/bold] = {d.a}   [bold]B[/bold] = {d.b}")
    mt = Table(title="Time, throughput, tensor and XU pipes, roofline point", title_justify="left")
    for c in ("metric", "A", "B", "B/A", ""):
        mt.add_column(c, justify="right" if c not in ("metric", "") else "left", no_wrap=(c == "metric"))
    for r in d.metrics.to_dict(orient="records"):
        if r["a"] is None and r["b"] is None:
            continue
        fa, fb = r["a"], r["b"]
        if r["metric"] == "duration_ns":
            fa, fb = fmt_ns(fa), fmt_ns(fb)
        numeric = all(isinstance(v, (int, float)) for v in (r["a"], r["b"]) if v is not None)
        mark = ("" if r["significant"] is None or not numeric
                else ("[bold]significant" if r["significant"] else "[dim]within ±5%"))
        mt.add_row(r["metric"], _num(fa), _num(fb), _ratio_text(r["ratio"]), mark)
    console.print(mt)
    console.print(_share_table("Stall reasons (share of all stall samples; 95% family-wise intervals)",
                               d.stalls, ["reason"], d.a, d.b))
    console.print(_share_table("Who waits: opcode class", d.classes, ["class"], d.a, d.b))
    console.print(_share_table("Who waits on whom: class x reason (top 15)", d.waits, ["class", "reason"], d.a, d.b,
                               limit=15))
    if len(d.waits_on):
        console.print(_share_table("Who waits on whom: class x reason ← producer (scoreboard stalls, top 15)",
                                   d.waits_on, ["class", "reason", "producer"], d.a, d.b, limit=15))
    console.print(_share_table("Short scoreboard (SSC): all, then per class", d.ssc, ["class"], d.a, d.b))
    if len(d.barriers):
        bt = Table(title="Barriers (static: in the SASS; executed: instructions run)", title_justify="left")
        for c in ("kind", "opcode", "A", "B", "B/A", ""):
            bt.add_column(c, justify="right" if c not in ("kind", "opcode", "") else "left")
        for r in d.barriers.to_dict(orient="records"):
            mark = "" if r["significant"] is None else ("[bold]changed" if r["significant"] else "[dim]same")
            bt.add_row(r["kind"], r["opcode"], _num(r["a"], "{:,}"), _num(r["b"], "{:,}"), _ratio_text(r["ratio"]),
                       mark)
        console.print(bt)
    if len(d.regions):
        srcs = f"{'/'.join(sorted(set(d.regions['source_a'].dropna())))} → {'/'.join(sorted(set(d.regions['source_b'].dropna())))}"
        console.print(_share_table(f"Source regions ({srcs}; share of all samples)", d.regions, ["region"], d.a, d.b))
    if len(d.phases):
        pt = Table(title="Phases (PM sampling: share of the kernel's time)", title_justify="left")
        for c in ("phase", "A", "B", "Δ pp", "A µs", "B µs", ""):
            pt.add_column(c, justify="left" if c in ("phase", "") else "right")
        for r in d.phases.to_dict(orient="records"):
            mark = "" if r["significant"] is None else ("[bold]changed" if r["significant"] else "[dim]within 2 samples")
            if r["phase"] == "dips":
                r = {**r, "phase": "dips (lost)"}
            us = [None if v is None else v / 1e3 for v in (r["duration_ns_a"], r["duration_ns_b"])]
            pt.add_row(r["phase"], _pct(r["share_a"]), _pct(r["share_b"]), _pct(r["delta"], True),
                       _num(us[0], "{:.1f}"), _num(us[1], "{:.1f}"), mark)
        console.print(pt)
        from profiler.cli.timeline import sparkline  # noqa: PLC0415

        for label, tl in ((d.a, d.timeline_a), (d.b, d.timeline_b)):
            curve = (tl or {}).get("curve") or {}
            if curve.get("tensor_pct"):
                console.print(f"  tensor pipe over normalised time, {label:>12}: {sparkline(curve['tensor_pct'], 50, 100.0)}")
    from rich.markup import escape  # noqa: PLC0415

    for n in dict.fromkeys(d.notes):
        console.print("[dim]note: " + escape(n))
    console.print(f"\n[bold]Verdict:[/bold] {d.verdict}")


def _emit(obj_dict: dict, long_frame, fmt: Format, render) -> None:
    if fmt == Format.json:
        print(json.dumps(obj_dict, indent=2, default=str))
    elif fmt == Format.csv:
        long_frame.to_csv(sys.stdout, index=False)
    else:
        render(_console())


@app.command("diff")
def diff_cmd(
    a: str = typer.Argument(..., help="Version id (in reports/h200/), report path, or a --series label: the baseline."),
    b: str = typer.Argument(..., help="Version id, report path or --series label: the one compared against A."),
    shape: Optional[str] = SHAPE_OPTION,
    kernel: Optional[List[str]] = KERNEL_OPTION,
    reports: Optional[Path] = REPORTS_OPTION,
    label: Optional[List[str]] = LABEL_OPTION,
    series: Optional[Path] = typer.Option(None, "--series", help="A series file (.toml): A and B are its labels."),
    verbose: bool = VERBOSE_OPTION,
    from_store: Optional[str] = FROM_STORE_OPTION,
    store: Optional[Path] = STORE_DIR_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Diff two versions' stall breakdowns: who waits on whom, SSC, barriers, tensor pipe, roofline, L2 read fan-out, time."""
    from profiler.compare import diff_versions  # noqa: PLC0415

    if from_store is not None:
        from profiler.compare import confounds, diff  # noqa: PLC0415

        pa, pb = _from_store(from_store, [a, b], store, kernel)
        d = diff(pa.summary, pb.summary, pa.label, pb.label, warnings=confounds([pa, pb]))
    else:
        d = diff_versions(a, b, shape=shape, kernels=kernel, reports=reports, labels=label or None, verbose=verbose,
                          series=series)
    if fmt != Format.table:
        _warn_stderr(d.warnings)
    _emit(d.to_dict(), d.long_frame(), fmt, lambda c: _render_diff(d, c))


CHANGE_COLUMN_MIN_WIDTH = 240  # console columns from which the migration table has a (one-line) change column


def _render_migration(m, console) -> None:
    from rich.markup import escape  # noqa: PLC0415
    from rich.panel import Panel  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from profiler.compare.diff import fmt_ns  # noqa: PLC0415

    for w in m.warnings:
        console.print(Panel(escape(w["message"]), title="confound", border_style="yellow"))
    rows = m.table.to_dict(orient="records")
    has = {k: any(isinstance(r.get(k), str) and r.get(k) or isinstance(r.get(k), float) and r[k] == r[k]
                  for r in rows) for k in ("gbps", "change", "l2_read_fanout")}
    # A change is a paragraph (version.toml's ``change``): as a column it wraps every row into dozens of lines and
    # squeezes the top waiter, so it is a column only on a console wide enough for it (one line, cut with an
    # ellipsis); otherwise each step below names its change in full. JSON and the HTML report always have it.
    change_below = has["change"] and console.width < CHANGE_COLUMN_MIN_WIDTH
    has["change"] = has["change"] and not change_below
    t = Table(title="Bottleneck migration", title_justify="left")
    cols = ["version", "duration", "TFLOPS"] + (["GB/s"] if has["gbps"] else []) + [
        "speed-up", "top waiter", "share [95%]", "heaviest role edge", "tensor path", "tensor · XU pipe",
        "tensor roof", "SSC", "DRAM"] + (["change"] if has["change"] else [])
    for c in cols:
        t.add_column(c, justify="left" if c in ("version", "top waiter", "heaviest role edge", "tensor path",
                                                  "change") else "right",
                     **({"no_wrap": True, "overflow": "ellipsis", "max_width": 60} if c == "change" else {}))
    beside_dst = set(m.steps["dst"][m.steps["beside"]]) if "beside" in m.steps and len(m.steps) else set()
    above = [None if r["version"] in beside_dst else v for r, v in zip(rows, [None] + [r["version"] for r in rows[:-1]])]
    for r, prev in zip(rows, above):
        top = (f"{escape(str(r['top_class']))}·{escape(str(r['top_reason']))}" if r["top_class"]
               else "— (no stall sampling)" if r.get("top_note") == "no stall samples" else "— (too few samples)")
        if isinstance(r.get("top_producer"), str):
            top += f" ← {escape(r['top_producer'])}"
        if r.get("top_opcode"):
            top += f" [dim]({escape(str(r['top_opcode']))})"
        if isinstance(r.get("top_tied_with"), str):
            top += f" [yellow]tied with {escape(r['top_tied_with'])}[/yellow]"
        tf = r["tflops"] if r["tflops"] is not None and r["tflops"] == r["tflops"] else r["tflops_counted"]
        cells = [escape(str(r["version"])), fmt_ns(r["duration_ns"]), _num(tf, "{:.3g}")]
        if has["gbps"]:
            cells.append(_num(r.get("gbps"), "{:.0f}"))
        cells += [speedup_cell(r, prev), top,
                  f"{_pct(r['top_share'])} [{_pct(r['top_lo'])}, {_pct(r['top_hi'])}]",
                  (f"{escape(r['top_role_edge'])} {_pct(r.get('top_role_share'))}"
                   if isinstance(r.get("top_role_edge"), str) else "—"),
                  _num(r["tensor_path"]), f'{_num(r["tensor_pipe_pct"], "{:.1f}%")} · {_xu_cell(r)}',
                  _num(r.get("tensor_roof_pct"), "{:.1f}%"), _pct(r["ssc_share"]),
                  _num(r.get("dram_pct_of_peak"), "{:.0f}%")]
        if has["change"]:
            cells.append(escape(r.get("change") or ""))
        t.add_row(*cells)
    console.print(t)
    from profiler.analyze.xu import xu_busier, xu_figure  # noqa: PLC0415

    if any(xu_figure(r)[1] == "sass" or xu_busier(r) for r in rows):
        console.print("[dim]tensor · XU pipe: each pipe's % of its own peak (XU: MUFU, the exponential); * from the "
                      "SASS (the report lacks ncu's counter; where both exist they agree); [yellow]yellow[/yellow]: "
                      "the XU pipe busier than the tensor pipe[/dim]")
    if has["l2_read_fanout"]:  # a line, not a column: the table is already as wide as a 150-column console allows
        cells = [f"{escape(str(r['version']))} {_fanout_cell(r)}" for r in rows if _fanout_cell(r) != "—"]
        rest = len(rows) - len(cells)
        console.print("L2 read fan-out (bytes the SMs received over the bytes the L2 read for them: SMs served per "
                      f"read): {', '.join(cells)}" + (f" [dim]({rest} other version{'s' * (rest > 1)}: not collected; "
                                                       "the WhowaitsRoofline section collects it)[/dim]" if rest else ""))
    marked = sorted({r["vs"] for r, prev in zip(rows, above) if isinstance(r.get("vs"), str) and r["vs"] != prev})
    console.print("[dim]speed-up: the row above's duration over this row's"
                  + (f"; 'vs X': against X instead ({', '.join(map(escape, marked))}: external subjects are set "
                     "beside the ladder's top rung, not chained as steps)" if beside_dst else
                     f"; 'vs X': against X instead ({', '.join(map(escape, marked))})" if marked else "")
                  + "[/dim]")
    if len(m.regions):
        rt = Table(title="Source regions per version (share of samples)", title_justify="left")
        names = [n for n in dict.fromkeys(m.regions["region"])]
        rt.add_column("version")
        rt.add_column("regions")
        for n in names:
            rt.add_column(n, justify="right")
        for v in m.versions:
            sub = m.regions[m.regions["version"] == v]
            got = dict(zip(sub["region"], sub["share"]))
            rt.add_row(v, "/".join(sorted(set(sub["source"]))) or "—", *[_pct(got.get(n)) for n in names])
        console.print(rt)
    if m.table["tail_share"].notna().any():
        from profiler.cli.timeline import sparkline  # noqa: PLC0415

        ph = Table(title="Phases per version (PM sampling: share of the kernel's time)", title_justify="left")
        for c in ("version", "ramp", "steady", "tail", "dips", "steady tensor pipe",
                  "tensor pipe over normalised time"):
            ph.add_column(c, justify="left" if c in ("version", "tensor pipe over normalised time") else "right",
                          no_wrap=True)
        tl = m.timelines
        for r in m.table.to_dict(orient="records"):
            vals = tl[(tl["version"] == r["version"]) & (tl["series"] == "tensor_pct")]["value"].tolist() if len(tl) else []
            ph.add_row(r["version"], _pct(r["ramp_share"]), _pct(r["steady_share"]), _pct(r["tail_share"]),
                       _pct(r.get("dip_share")), _num(r["steady_tensor_pct"], "{:.1f}%"), sparkline(vals, 40, 100.0) if vals else "—")
        console.print(ph)
    if len(m.steps):
        by = {r["version"]: r for r in rows}
        steps = m.steps.to_dict(orient="records")
        rungs = [s for s in steps if not s.get("beside")]
        ext = [s for s in steps if s.get("beside")]
        if rungs:
            console.print("[bold]Path of the top waiter[/bold]")
        for i, s in enumerate(rungs, 1):
            console.print(f"  {i}. {escape(s['sentence'])}")
            r = by.get(s["dst"], {})
            for key in (("change",) if change_below else ()) + ("hypothesis", "verdict"):
                if r.get(key):
                    console.print(f"     [dim]{key}:[/dim] {escape(r[key])}")
        if ext:  # external subjects: set beside the top rung, not steps of the ladder
            console.print(f"[bold]Beside the top rung[/bold] ({escape(ext[0]['src'])})")
            for s in ext:
                console.print(f"  - {escape(s['sentence'])}")
    for r in rows:
        if isinstance(r.get("top_note"), str) and r["top_note"] != "no stall samples":
            console.print(f"[dim]note: {escape(str(r['version']))}: no top waiter: {escape(r['top_note'])}[/dim]")
    for n in dict.fromkeys(m.notes):
        console.print("[dim]note: " + escape(n))


def speedup_cell(r: dict, prev: str | None) -> str:
    """``1.17x``: the row's speed-up against the row above; ``0.64x vs v12`` where migration measured it
    against another version (an external subject against the ladder's top rung)."""
    x = _num(r.get("speedup_prev"), "{:.2f}x")
    vs = r.get("vs")
    if x == "—" or not isinstance(vs, str) or vs == prev:
        return x
    short = vs.split("_", 1)[0] if re.match(r"v\d+_", vs) else vs
    return f"{x} vs {escape_markup(short)}"


def escape_markup(text: str) -> str:
    from rich.markup import escape  # noqa: PLC0415

    return escape(text)


def _with_problem(profiled, flops, nbytes):
    """Give every version without its own problem size (series file, sidecar) ``flops``/``nbytes``."""
    from profiler.errors import WhowaitsError  # noqa: PLC0415

    for opt, v in (("--problem-flops", flops), ("--problem-bytes", nbytes)):
        if v is not None and not v > 0:
            raise WhowaitsError(f"{opt} must be a positive number")
    for p in profiled:
        for key, v in (("problem_flops", flops), ("problem_bytes", nbytes)):
            if v is not None and not (p.meta or {}).get(key) and not (p.sidecar or {}).get(key):
                p.meta[key] = float(v)
    return profiled


def _report(profiled, m, out: Path, force: bool, verbose: bool = False) -> Path:
    from profiler.compare import diff  # noqa: PLC0415
    from profiler.compare.confound import confounds  # noqa: PLC0415
    from profiler.html import render_report, write_html  # noqa: PLC0415

    diffs = [diff(x.summary, y.summary, x.label, y.label, warnings=confounds([x, y]), verbose=verbose)
             for x, y in zip(profiled, profiled[1:])]
    title = next((p.meta.get("series_title") for p in profiled if (p.meta or {}).get("series_title")), None)
    kw = {"title": title} if title else {}
    return write_html(out, render_report(m, profiled, diffs, verbose=verbose, **kw), force=force)


@app.command("migration")
def migration_cmd(
    versions: Optional[List[str]] = typer.Argument(None, help="Versions or report paths, in order, or one "
                                                                "series file (.toml) (default: every version "
                                                                "with a report, ladder order)."),
    shape: Optional[str] = ALL_SHAPE_OPTION,
    kernel: Optional[List[str]] = KERNEL_OPTION,
    reports: Optional[Path] = REPORTS_OPTION,
    label: Optional[List[str]] = LABEL_OPTION,
    html: Optional[Path] = typer.Option(None, "--html", help="Also write the standalone HTML report here."),
    force: bool = typer.Option(False, "--force", help="Overwrite the --html file if it exists."),
    problem_flops: Optional[float] = PROBLEM_FLOPS_OPTION,
    problem_bytes: Optional[float] = PROBLEM_BYTES_OPTION,
    verbose: bool = VERBOSE_OPTION,
    from_store: Optional[str] = FROM_STORE_OPTION,
    store: Optional[Path] = STORE_DIR_OPTION,
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Where the bottleneck goes across versions: top waiter, time, TFLOPS, one sentence per step."""
    from profiler.compare import load_versions, migrate  # noqa: PLC0415

    if html is not None:
        from profiler.html import check_target  # noqa: PLC0415

        check_target(html, force)  # before any work or output
    omitted: list[str] = []
    if from_store is not None:
        profiled = _with_problem(_from_store(from_store, versions, store, kernel), problem_flops, problem_bytes)
    else:
        profiled = _with_problem(load_versions(versions, shape=shape, kernels=kernel, reports=reports,
                                               omitted=omitted, labels=label or None), problem_flops, problem_bytes)
    m = migrate(profiled=profiled, notes=omitted, verbose=verbose)
    if fmt != Format.table:
        _warn_stderr(m.warnings)
    _emit(m.to_dict(), m.table, fmt, lambda c: _render_migration(m, c))
    if html is not None:
        written = _report(profiled, m, html, force, verbose=verbose)
        print(f"whowaits: wrote {written}", file=sys.stderr)


@app.command("report")
def report_cmd(
    versions: Optional[List[str]] = typer.Argument(None, help="Versions or report paths, or one series file "
                                                                "(.toml) (default: all, ladder order)."),
    html: Path = typer.Option(..., "--html", help="Where to write the self-contained HTML file."),
    shape: Optional[str] = ALL_SHAPE_OPTION,
    kernel: Optional[List[str]] = KERNEL_OPTION,
    reports: Optional[Path] = REPORTS_OPTION,
    label: Optional[List[str]] = LABEL_OPTION,
    force: bool = typer.Option(False, "--force", help="Overwrite the HTML file if it exists."),
    problem_flops: Optional[float] = PROBLEM_FLOPS_OPTION,
    problem_bytes: Optional[float] = PROBLEM_BYTES_OPTION,
    verbose: bool = VERBOSE_OPTION,
) -> None:
    """Write one self-contained HTML report: ladder, migration, each version, consecutive diffs."""
    from profiler.compare import load_versions, migrate  # noqa: PLC0415
    from profiler.html import check_target  # noqa: PLC0415

    check_target(html, force)  # before any work
    omitted: list[str] = []
    profiled = _with_problem(load_versions(versions, shape=shape, kernels=kernel, reports=reports, omitted=omitted,
                                           labels=label or None), problem_flops, problem_bytes)
    m = migrate(profiled=profiled, notes=omitted, verbose=verbose)
    _warn_stderr(m.warnings)
    written = _report(profiled, m, html, force, verbose=verbose)
    print(f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB, {len(profiled)} version(s))")
