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
