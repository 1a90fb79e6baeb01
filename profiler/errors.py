"""The one error type the CLI turns into a single line on stderr and exit code 2."""


class WhowaitsError(Exception):
    """A user-facing error: what is wrong and what to do, in one line.

    Raise it anywhere below the CLI; ``profiler.cli.main`` prints ``whowaits: error: <msg>``
    to stderr and exits with ``exit_code`` (2 by default), with no traceback.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
