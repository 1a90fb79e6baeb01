"""`whowaits env`: every ``WHOWAITS_*`` setting (profiler/settings.py), its value now, default and meaning."""

from __future__ import annotations

import json

import typer

from profiler import settings
from profiler.cli._app import FORMAT_OPTION, Format, app, console


@app.command("env")
def env_cmd(fmt: Format = FORMAT_OPTION) -> None:
    """Print every WHOWAITS_* environment variable: name, value (unset: blank), default, meaning."""
    rows = settings.rows()
    if fmt == Format.json:
        typer.echo(json.dumps(rows, indent=1))
        return
    if fmt == Format.csv:
        import csv  # noqa: PLC0415
        import io  # noqa: PLC0415

        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        typer.echo(buf.getvalue().rstrip("\n"))
        return
    from rich.table import Table  # noqa: PLC0415

    table = Table(title="WHOWAITS_* settings (docs/settings.md)")
    for c in ("name", "value", "default", "scope", "meaning"):
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*["" if r[c] is None else str(r[c]) for c in ("name", "value", "default", "scope", "meaning")])
    console(200).print(table)
