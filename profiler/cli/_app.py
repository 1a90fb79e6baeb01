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


# --- leaner parameter coercion --------------------------------------------------------------------------------
def _lean_converter(annotation, info):
    """A converter for the parameter types our commands use, with typer's own semantics, that does not import
    pydantic; None for anything else (typer's own coercion then)."""
    import typing  # noqa: PLC0415
    from enum import Enum  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from typer import _param_types as pt  # noqa: PLC0415

    if getattr(info, "parser", None) is not None:
        return None
    if typing.get_origin(annotation) is list:
        (inner,) = typing.get_args(annotation) or (None,)
        leaf = _lean_converter(inner, info) if inner is not None else None
        if leaf is None:
            return None
        return lambda v, ctx, param: [leaf(x, ctx, param) for x in (v if isinstance(v, (list, tuple)) else [v])]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        choices, sensitive = tuple(annotation), info.case_sensitive
        return lambda v, ctx, param: pt.coerce_cli_choice(v, choices=choices, case_sensitive=sensitive, ctx=ctx)
    if annotation is str:
        return lambda v, ctx, param: v if isinstance(v, str) else str(v) if not isinstance(v, bytes) else None
    if annotation in (int, float):
        lo, hi, clamp = info.min, info.max, info.clamp

        def number(v, ctx, param):
            try:
                x = annotation(v.strip() if isinstance(v, str) else v)
            except (TypeError, ValueError):
                raise ValueError("Input should be a valid integer, unable to parse string as an integer"
                                 if annotation is int else
                                 "Input should be a valid number, unable to parse string as a number") from None
            if clamp:
                return annotation(lo) if lo is not None and x < lo else annotation(hi) if hi is not None and x > hi else x
            if lo is not None and x < lo:
                raise ValueError(f"Input should be greater than or equal to {lo}")
            if hi is not None and x > hi:
                raise ValueError(f"Input should be less than or equal to {hi}")
            return x
        return number
    if annotation is bool:
        truth = {"1": True, "true": True, "t": True, "yes": True, "y": True, "on": True,
                 "0": False, "false": False, "f": False, "no": False, "n": False, "off": False, "": False}

        def boolean(v, ctx, param):
            if isinstance(v, bool):
                return v
            key = str(v).strip().lower()
            if key not in truth:
                raise ValueError("Input should be a valid boolean, unable to interpret input")
            return truth[key]
        return boolean
    if annotation is Path and pt.routes_to_path(annotation, info) and info.path_type in (None, Path):
        return lambda v, ctx, param: pt.coerce_cli_path(Path(v) if isinstance(v, str) else v, info, path_type=Path,
                                                         param=param, ctx=ctx)
    return None


def _lean_coercion() -> bool:
    """typer (>= 0.2x) coerces every parameter of the command being run through a pydantic ``TypeAdapter``:
    importing pydantic and building them is ~0.14 s of a computed ``show``/``diff``/``migration`` on the loaded
    2-core machine (scripts/bench_cli.py). Our parameters are str, int/float (with min/max), bool, Path,
    Enum and lists of those: those are coerced here by typer's own ``coerce_cli_choice`` /
    ``coerce_cli_path`` and plain conversions (tests/test_cli_ux.py holds every parameter of every command to
    typer's result); any other type, and a typer without these internals, keeps typer's coercion."""
    try:
        from dataclasses import dataclass  # noqa: PLC0415
        from typing import Any  # noqa: PLC0415

        from typer import _coercion, _param_types, core  # noqa: PLC0415
        from typer._click.exceptions import BadParameter  # noqa: PLC0415

        real = core.build_runtime_param
        base = _coercion.RuntimeParam
        assert callable(_param_types.coerce_cli_choice) and callable(_param_types.coerce_cli_path)
    except (ImportError, AttributeError, AssertionError):
        return False
    if getattr(real, "whowaits_lean", False):
        return True

    @dataclass(frozen=True)
    class LeanRuntimeParam(base):
        convert: Any = None

        def _coerce_value(self, value, param, ctx):
            try:
                out = self.convert(value, ctx, param)
            except (ValueError, TypeError) as exc:
                raise BadParameter(str(exc), ctx=ctx, param=param) from exc
            if out is None:  # bytes for a str: typer's own decoding
                return real(_coercion.resolve_type_descriptor(self.annotation, self.parameter_info))._coerce_value(
                    value, param=param, ctx=ctx)
            return out

    def build(descriptor):
        convert = None if descriptor.file_annotation is not None else _lean_converter(descriptor.annotation,
                                                                                     descriptor.parameter_info)
        if convert is None:
            return real(descriptor)
        return LeanRuntimeParam(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                                convert=convert)

    build.whowaits_lean = True
    build.typer_build = real
    core.build_runtime_param = build
    return True


_lean_coercion()
