"""`whowaits check`: hold the policy (whowaits.toml) against bench results, reports and builds.
A thin renderer over :mod:`profiler.check`. Exit 0: every rule holds; 1: a rule failed; 2: usage or
input error (a missing baseline, bench file or report is an error, never a pass)."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Optional

import typer

from profiler.cli._app import app


class CheckFormat(str, Enum):
    table = "table"
    json = "json"
    junit = "junit"
    github = "github"


@app.command("check")
def check_cmd(
    policy: Optional[str] = typer.Option(None, "--policy", "-p",
                                         help="policy file (default: whowaits.toml here or above, or "
                                              "pyproject.toml [tool.whowaits.check])"),
    baseline: Optional[str] = typer.Option(None, "--baseline", "-b",
                                           help="bench .json, a folder laid out like the repository, or a git "
                                                "revision (overrides [check] baseline)"),
    bench: Optional[str] = typer.Option(None, "--bench", help="bench folder or file to check (default: the policy's)"),
    reports: Optional[str] = typer.Option(None, "--reports", help="reports folder to check (default: the policy's)"),
    fmt: CheckFormat = typer.Option(CheckFormat.table, "--format", "-f", help="table, json, junit or github."),
) -> None:
    """Gate on speed and on where warps wait: every rule's value, limit and verdict (exit 0/1/2)."""
    from profiler import check
    from profiler.check import render
    from profiler.errors import WhowaitsError

    try:
        report = check.run(policy=policy, baseline=baseline, bench=bench, reports=reports)
    except WhowaitsError as err:
        if fmt == CheckFormat.github:  # the input error as an annotation too (the one stderr line follows)
            typer.echo(render.github_error(str(err)))
        elif fmt == CheckFormat.junit:  # a JUnit file with the error, never an empty one (`> file || true`)
            typer.echo(render.junit_error(str(err), policy))
        raise
    if fmt == CheckFormat.json:
        typer.echo(render.to_json(report))
    elif fmt == CheckFormat.junit:
        typer.echo(render.to_junit(report))
    elif fmt == CheckFormat.github:
        typer.echo(render.to_github(report))
    else:
        _table(report)
    raise typer.Exit(report.exit_code)


def _table(report) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from profiler.check import render

    width = int(os.environ.get("COLUMNS", 0) or 0) or (None if sys.stdout.isatty() else 160)
    console = Console(width=width, soft_wrap=False, highlight=False)
    t = Table(title=f"whowaits check ({report.policy})", title_justify="left")
    for c in render.TABLE_COLUMNS:
        t.add_column(c, overflow="fold", justify="right" if c == "rule" else "left")
    rows = render.table_rows(report)
    for r in rows:
        t.add_row(*[Text(r[c]) for c in render.TABLE_COLUMNS], style=None if r["verdict"] == "pass" else "bold")
    console.print(t)
    for r in rows:
        if r["verdict"] != "pass":
            console.print(f"{r['verdict']}: rule {r['rule']}: {r['message']}", markup=False, soft_wrap=True)
    console.print(render.summary_line(report), markup=False, soft_wrap=True)
