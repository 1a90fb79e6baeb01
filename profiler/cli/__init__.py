"""Command-line interface: a thin layer, one module per command group, each over a public function.

Every module imports ``app`` from ``_app`` and registers its commands on it.
``main`` turns a :class:`profiler.errors.WhowaitsError` into one line on stderr and a non-zero exit.
"""

import sys

from profiler.cli._app import app
from profiler.errors import WhowaitsError

# Command modules register themselves on import (order = order in --help).
from profiler.cli import show as _show  # noqa: F401,E402
from profiler.cli import timeline as _timeline  # noqa: F401,E402
from profiler.cli import compare as _compare  # noqa: F401,E402
from profiler.cli import profile as _profile  # noqa: F401,E402
from profiler.cli import kernels as _kernels  # noqa: F401,E402
from profiler.cli import roles as _roles  # noqa: F401,E402
from profiler.cli import check as _check  # noqa: F401,E402
from profiler.cli import sweep as _sweep  # noqa: F401,E402


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except WhowaitsError as err:
        print(f"whowaits: error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("whowaits: interrupted", file=sys.stderr)
        sys.exit(130)
