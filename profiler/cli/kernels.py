"""`whowaits` commands of this group (registered on import)."""

from profiler.cli._app import app  # noqa: F401
