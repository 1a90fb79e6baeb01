"""Error kinds of a sweep job, and which of them are worth another attempt.

A job's failure is one line (a :class:`profiler.errors.WhowaitsError` message, or what the job process
printed); :func:`classify` gives it a kind: a message that says the GPU was busy or out of memory, or that ncu
lost its connection, is transient whatever raised it (a program that crashed because another process held the
GPU's memory is a ``ProgramFailed``); otherwise the error's class from :mod:`profiler.errors` names the kind
(:data:`CLASS_KINDS`), and a bare message is matched against :data:`PATTERNS`.
Only :data:`TRANSIENT` kinds are retried: a busy or out-of-memory GPU (another process on it), a lost
ncu connection, a timed-out or vanished job process. A crash of the profiled program, a build error, a
filter that matches nothing or missing counter permissions fail the same way every time.
"""

from __future__ import annotations

import re

#: (kind, regex on the lower-cased message), first match wins
PATTERNS: tuple[tuple[str, str], ...] = (
    ("permission", r"err_nvgpuctrperm"),
    ("no_ncu", r"ncu \(nsight compute cli\) not found|whowaits_ncu=.* is not an executable"),
    ("no_gpu", r"no usable nvidia gpu|no visible gpu|needs torch and an nvidia gpu"),
    ("gpu_busy", r"out of memory|cudaerrormemoryallocation|busy or unavailable|cudaerrordevicesunavailable"
                 r"|cuda_error_out_of_memory"),
    ("timeout", r"timed out|timeout after"),
    ("ncu_connection", r"lost connection|failed to connect|connection (?:to|with) the (?:target|application)"),
    ("worker_lost", r"job process (?:died|was killed)|worker (?:died|lost)|node died"),
    ("lock_timeout", r"waited .* for the lock of gpu"),
    ("build", r"does not compile|build failed|nvcc not found"),
    ("no_kernel", r"matched no kernel|not profiled|no kernel launch"),
    ("program_failed", r"the profiled program failed"),
    ("unsupported", r"does not support|unsupported"),
    ("usage", r"unknown (?:kernel )?version|bad shape key|unknown external subject"),
)
#: profiler.errors class name -> kind (the first class in the error's MRO that is listed)
CLASS_KINDS = {"NcuNotFound": "no_ncu", "NoGpu": "no_gpu", "CounterPermission": "permission",
               "ProgramFailed": "program_failed", "NothingProfiled": "no_kernel", "LaunchCount": "launch_count",
               "NcuFailed": "ncu_failed", "SectionError": "section"}
TRANSIENT = frozenset({"gpu_busy", "timeout", "ncu_connection", "worker_lost", "lock_timeout"})


def classify(error, cls: type | None = None) -> str:
    """The kind of a failure: an exception, or its one-line message with the class that raised it (``cls``)."""
    kind = getattr(error, "kind", None)
    if isinstance(kind, str) and kind:
        return kind
    text = str(error).lower()
    for name, pattern in PATTERNS:
        if name in TRANSIENT and re.search(pattern, text):
            return name
    cls = cls or (type(error) if isinstance(error, BaseException) else None)
    for base in getattr(cls, "__mro__", ()):
        if base.__name__ in CLASS_KINDS:
            return CLASS_KINDS[base.__name__]
    for name, pattern in PATTERNS:
        if re.search(pattern, text):
            return name
    return "error"


def transient(kind: str) -> bool:
    return kind in TRANSIENT
