"""Error kinds. Every user-facing error is a :class:`WhowaitsError`, which the CLI turns into a single line
on stderr and exit code 2; the subclasses say *what kind* of failure it was, so callers decide on the
class (``except ProgramFailed``), never on the message text.

    WhowaitsError
    ├── SectionError          a section file (or the section schema) does not parse
    ├── QueryRefused          `whowaits query` got a statement that is not a read (COPY, ATTACH, SET …)
    ├── StoreBusy             another process writes the store (its lock is held)
    └── NcuError              profiling under ncu failed
        ├── NcuNotFound       no ncu executable
        ├── NoGpu             no usable NVIDIA GPU (nvidia-smi or ncu says so)
        ├── CounterPermission ncu may not read the performance counters (ERR_NVGPUCTRPERM)
        ├── ProgramFailed     the profiled program exited with an error (crashed)
        ├── NothingProfiled   the kernel filter matched no launch
        ├── LaunchCount       a split matched more than one launch of the session report
        └── NcuFailed         any other ncu failure (its exit code and first error line)
"""

from __future__ import annotations

__all__ = [
    "CounterPermission",
    "LaunchCount",
    "NcuError",
    "NcuFailed",
    "NcuNotFound",
    "NoGpu",
    "NothingProfiled",
    "ProgramFailed",
    "QueryRefused",
    "SectionError",
    "StoreBusy",
    "WhowaitsError",
]


class WhowaitsError(Exception):
    """A user-facing error: what is wrong and what to do, in one line.

    Raise it anywhere below the CLI; ``profiler.cli.main`` prints ``whowaits: error: <msg>``
    to stderr and exits with ``exit_code`` (2 by default), with no traceback.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class SectionError(WhowaitsError):
    """A ``sections/*.section`` file or ``section-schema.textproto`` cannot be read or parsed."""


class QueryRefused(WhowaitsError):
    """An SQL statement that is not a read of the store (a write, ATTACH, INSTALL/LOAD, SET, COPY …)."""


class StoreBusy(WhowaitsError):
    """Another process holds the store's lock (``whowaits index`` writing it) beyond the wait allowed."""


class NcuError(WhowaitsError):
    """Profiling under Nsight Compute failed; the subclass says how."""


class NcuNotFound(NcuError):
    """No ncu executable (not on PATH, or ``WHOWAITS_NCU`` is not an executable file)."""


class NoGpu(NcuError):
    """No usable NVIDIA GPU: nvidia-smi did not run or found none, or ncu found no device."""


class CounterPermission(NcuError):
    """ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM)."""


class ProgramFailed(NcuError):
    """The profiled program exited with an error code (it crashed under ncu)."""


class NothingProfiled(NcuError):
    """ncu profiled no launch: the kernel filter (or the split's kernel regex) matched none."""


class LaunchCount(NcuError):
    """A split out of a session report matched more than one launch."""


class NcuFailed(NcuError):
    """Any other ncu failure: a non-zero exit code, or no report written."""
