"""`whowaits timeline`: when inside the kernel — a thin renderer over :func:`profiler.analyze.timeline.timelines`."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app

_BARS = " ▁▂▃▄▅▆▇█"


@app.command("timeline")
def timeline_cmd(
    report: Path = typer.Argument(..., help="An Nsight Compute report (.ncu-rep).", show_default=False),
    kernel: Optional[str] = typer.Option(None, "--kernel", "-k", help="Regex on the demangled kernel name."),
    fmt: Format = FORMAT_OPTION,
    width: int = typer.Option(60, "--width", min=10, max=400, help="Columns of the table's sparklines."),
) -> None:
    """Show when inside each launch the GPU did what (PM sampling): time series of tensor-pipe
    activity, issue, DRAM/L2 throughput, CTAs launched and warp states, and the ramp-up, steady
    state and tail found in them with their shares of the kernel's time."""
    from profiler.analyze.timeline import timelines  # noqa: PLC0415

    tls = timelines(report, kernel=kernel)
    if fmt is Format.json:
        json.dump(tls, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif fmt is Format.csv:
        write_csv(tls, sys.stdout)
    else:
        render(tls, width)


def write_csv(tls: list[dict], stream) -> None:
    """Long rows: report, launch, kernel, record (sample | phase | dip | summary), name (series, phase,
    ``dip`` or field), t_ns (sample time, phase or dip start), end_ns (phase or dip end), value (sample value,
    phase share, the dip's share of the time lost, summary value); empty cells for null."""
    w = csv.writer(stream, lineterminator="\n")
    w.writerow(["report", "launch", "kernel", "record", "name", "t_ns", "end_ns", "value"])

    def cell(v):
        return "" if v is None else v

    for tl in tls:
        head = [tl["report"], tl["launch_index"], tl["kernel"]]
        for key in ("duration_ns", "interval_ns", "activity", "steady_level", "steady_tensor_pct",
                    "ramp_share", "tail_share", "dip_share", "dip_period_ns"):
            w.writerow([*head, "summary", key, "", "", cell(tl[key])])
        for m in tl["missing"]:
            w.writerow([*head, "summary", "missing", "", "", f"{m['field']} ({m['section']})"])
        for p in tl["phases"] or []:
            w.writerow([*head, "phase", p["name"], p["start_ns"], p["end_ns"], p["share"]])
        for d in tl.get("dips") or []:
            w.writerow([*head, "dip", "dip", d["start_ns"], d["end_ns"], d["share"]])
        for s, values in (tl["series"] or {}).items():
            for t, v in zip(tl["t_ns"], values):
                w.writerow([*head, "sample", s, t, "", v])


def sparkline(values: list[float], width: int, top: float | None = None) -> str:
    """Unicode block sparkline of ``values`` resampled to ``width`` columns (bin means), 0..top."""
    if not values:
        return ""
    import numpy as np  # noqa: PLC0415

    v = np.asarray(values, dtype=float)
    edges = np.linspace(0, len(v), width + 1)
    cols = [v[int(a):max(int(b), int(a) + 1)].mean() for a, b in zip(edges[:-1], edges[1:])]
    top = top if top else (max(cols) or 1.0)
    return "".join(_BARS[min(len(_BARS) - 1, int(round(c / top * (len(_BARS) - 1))))] for c in cols)


def render_dips(console, tl: dict) -> None:
    """The steady state's dips: where, how deep, the time they lost and what rose in them."""
    found = tl.get("dips") or []
    if not found:
        console.print(f"  no dips in the steady state (no run under 90% of the {tl['activity']} around it)")
        return
    from rich.table import Table  # noqa: PLC0415

    dt = Table(title=f"Dips in the steady state ({tl['activity']} under 90% of the level around it)",
               title_justify="left", show_header=True, header_style="bold")
    for col in ("start us", "end us", "level", "lowest", "lost us", "share", "rose (x its steady median)"):
        dt.add_column(col, justify="left" if col.startswith("rose") else "right")
    for d in found:
        rose = ", ".join(f"{s} {r:.1f}x" for s, r in d["rose"].items()) or "—"
        dt.add_row(f"{d['start_ns'] / 1e3:.1f}", f"{d['end_ns'] / 1e3:.1f}", f"{d['level']:.1f}",
                   f"{d['min_pct']:.1f}", f"{d['deficit_ns'] / 1e3:.2f}", f"{d['share']:.1%}", rose)
    console.print(dt)
    period = tl.get("dip_period_ns")
    console.print(f"  {len(found)} dip{'s' if len(found) > 1 else ''} lost {tl['dip_share']:.1%} of the kernel's time"
                  + (f", one every {period / 1e3:.1f} us" if period else ""))


def render(tls: list[dict], width: int = 60) -> None:
    from rich.table import Table  # noqa: PLC0415

    from profiler.cli.show import _console  # noqa: PLC0415

    console = _console()
    for tl in tls:
        console.print(f"[bold]{tl['kernel']}[/bold]  (launch {tl['launch_index']} of {tl['report']})")
        if tl["t_ns"] is None:
            names = sorted({m["section"] for m in tl["missing"]})
            console.print(f"  no PM sampling in this report: profile with the {', '.join(names)} section "
                          "(in the whowaits set: whowaits profile VERSION)")
            continue
        console.print(f"  window {tl['duration_ns'] / 1e3:.1f} us, {len(tl['t_ns'])} samples every "
                      f"{tl['interval_ns'] / 1e3:.2f} us"
                      + (f"; phases from {tl['activity']} (steady level {tl['steady_level']:.1f})"
                         if tl.get("phases") else ""))
        if not tl.get("phases"):
            for m in tl["missing"]:
                console.print(f"  [dim]{m['field']}: {m.get('reason') or 'section ' + m['section']}[/dim]")
            continue
        pt = Table(show_header=True, header_style="bold")
        for col in ("phase", "start us", "end us", "duration us", "share", "samples"):
            pt.add_column(col, justify="left" if col == "phase" else "right")
        for p in tl["phases"]:
            pt.add_row(p["name"], f"{p['start_ns'] / 1e3:.1f}", f"{p['end_ns'] / 1e3:.1f}",
                       f"{p['duration_ns'] / 1e3:.1f}", f"{p['share']:.1%}", str(p["samples"]))
        console.print(pt)
        st = tl["steady_tensor_pct"]
        console.print(f"  steady-state tensor activity {'—' if st is None else f'{st:.1f}%'}, "
                      f"tail {tl['tail_share']:.1%} of the kernel's time")
        render_dips(console, tl)
        st_table = Table(show_header=True, header_style="bold")
        st_table.add_column("series")
        st_table.add_column("max", justify="right")
        st_table.add_column(f"over time (0 .. {tl['duration_ns'] / 1e3:.0f} us)", no_wrap=True)
        for s, values in tl["series"].items():
            pct = s.endswith("_pct")
            st_table.add_row(s, f"{max(values):.3g}", sparkline(values, width, 100.0 if pct else None))
        console.print(st_table)
        for m in tl["missing"]:
            console.print(f"  [dim]missing: {m['field']} ({m.get('reason') or 'section ' + m['section']})[/dim]")
