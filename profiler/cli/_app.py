"""The typer application every command module registers on, and options they share."""

from enum import Enum

import typer

app = typer.Typer(
    name="whowaits",
    help="Nsight Compute bottleneck analysis: who waits on whom, version by version.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    """Output format shared by every command (``--format``)."""

    table = "table"
    json = "json"
    csv = "csv"


FORMAT_OPTION = typer.Option(Format.table, "--format", "-f", help="table (rich), json or csv.")


def console(width_when_piped: int):
    """A rich console on stdout: ``$COLUMNS`` wide when that is a positive number (anything else
    in it is ignored), else the terminal's width, else ``width_when_piped``."""
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    cols = os.environ.get("COLUMNS", "").strip()
    width = int(cols) if cols.isdigit() and int(cols) > 0 else None
    if width is None and not sys.stdout.isatty():
        width = width_when_piped
    return Console(width=width, soft_wrap=False, highlight=False)
