"""`whowaits roles`: the barrier wait graph between warp roles — a thin renderer over
:func:`profiler.analyze.roles.role_graph`."""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import typer

from profiler.cli._app import FORMAT_OPTION, Format, app


def graphs(report: Path, kernel: str | None = None) -> list:
    """The :class:`~profiler.analyze.roles.RoleGraph` of every selected launch of ``report``."""
    from profiler.analyze.roles import role_graph
    from profiler.report import load_report, select_launches

    return [role_graph(la) for la in select_launches(load_report(report), kernel)]


def _warps(ws: list) -> str:
    """``0-7``, ``8,9,11``; ``—`` when unknown."""
    if not ws:
        return "—"
    runs: list[list[int]] = []
    for w in sorted(ws):
        if runs and w == runs[-1][1] + 1:
            runs[-1][1] = w
        else:
            runs.append([w, w])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


@app.command()
def roles(
    report: Path = typer.Argument(..., help="An Nsight Compute report (.ncu-rep).", show_default=False),
    kernel: str | None = typer.Option(None, "--kernel", "-k", help="Regex on the demangled kernel name."),
    fmt: Format = FORMAT_OPTION,
) -> None:
    """Who waits on whom between warp roles: roles found by deciding thread-index branches warp by
    warp (else from setmaxnreg), every barrier wait site (mbarrier try-waits with every reader of
    their predicate, named barriers, wgmma group and operand waits, cp.async group waits) paired
    with the role or engine that releases it, weighted by the wait sites' samples."""
    gs = graphs(report, kernel)
    if fmt is Format.json:
        json.dump([g.to_dict() for g in gs], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if fmt is Format.csv:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["launch", "kernel", "waiter", "barrier", "releaser", "samples", "share", "inferred"])
        for g in gs:
            for e in g.edges:
                w.writerow([g.launch_index, g.kernel, e.waiter, e.barrier, e.releaser, e.samples,
                            f"{e.share:.6f}", e.inferred])
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    width = int(os.environ.get("COLUMNS", "0")) if os.environ.get("COLUMNS", "").isdigit() else 0
    con = Console(width=width or (None if sys.stdout.isatty() else 150), soft_wrap=False, highlight=False)
    for g in gs:
        con.print(f"[bold]launch {g.launch_index}[/bold] {escape(g.kernel[:120])}  ({g.total_samples} samples)")
        if g.missing:
            sections = ", ".join(sorted({m["section"] for m in g.missing}))
            con.print(f"  no stall samples in this report: who waits on whom needs ncu's {sections} section "
                      "(PC sampling); " + ("the roles below come from the SASS alone" if g.roles
                                           else "the report holds no SASS either, so there is nothing to show"))
            if not g.roles:
                continue
        t = Table(title="roles (inferred from thread-index branches, else setmaxnreg)", title_justify="left")
        for c in ("role", "does", "warps", "setmaxnreg", "PCs", "instructions executed", "samples", "share"):
            t.add_column(c, justify="left" if c in ("role", "does", "warps") else "right")
        for r in g.roles:
            share = f"{100 * r.samples / g.total_samples:.1f}%" if g.total_samples else "—"
            t.add_row(r.name, escape(r.does), _warps(r.warps), "—" if r.setmaxnreg is None else str(r.setmaxnreg),
                      str(r.pcs), f"{r.inst_executed:,}", f"{r.samples:,}", share)
        con.print(t)
        bad = [r for r in g.roles if r.entry_expected is not None and r.entry_executed != r.entry_expected]
        if bad:
            con.print(escape("warp counts disagree with ncu's executed counts: " + "; ".join(
                f"{r.name} entry {r.entry:#x} executed {r.entry_executed:,}, {len(r.warps)} warps predict "
                f"{r.entry_expected:,}" for r in bad)))
        t = Table(title=escape("who waits on whom: waiter —[barrier]→ releaser"), title_justify="left")
        for c in ("waiter", "barrier", "releaser", "samples", "share", "", "evidence"):
            t.add_column(c, justify="right" if c in ("samples", "share") else "left")
        for e in g.edges:
            if not e.samples:
                continue
            t.add_row(escape(e.waiter), escape(e.barrier), escape(e.releaser), f"{e.samples:,}", f"{100 * e.share:.1f}%",
                      "inferred" if e.inferred else "", escape(e.evidence))
        con.print(t)
        quiet = [e for e in g.edges if not e.samples]
        if quiet:
            con.print(escape("no samples on: " + "; ".join(f"{e.waiter} —[{e.barrier}]→ {e.releaser}" for e in quiet)))
        if g.unresolved["samples"] or g.unresolved["reasons"]:
            con.print(escape(f"unresolved: {g.unresolved['samples']} samples — "
                             + "; ".join(f"{k} ({v})" for k, v in g.unresolved["reasons"].items())))
