"""What a trace build writes and the analysis reads, shared by both sides: ``kernels.tracebuild`` (builds,
runs and saves a traced rung on the GPU) and ``profiler.analyze.trace_waits`` (reads the wait log). Only
the standard library: ``kernels`` may import it (it may not import ``profiler.analyze``).
"""

from __future__ import annotations

__all__ = ["WAIT_CLASSES", "waits_name"]

#: the record classes a wait-log build logs (``WHOWAITS_TRACE_WAITS_CLASSES`` of trace.cuh, a bit mask per
#: class); one alone perturbs the kernel least
WAIT_CLASSES = {"all": 15, "mbarrier": 1, "named": 2, "wgmma": 4, "arrivals": 8}


def waits_name(shape: str, classes: str = "all", per_warp: bool = False) -> str:
    """The wait log's file name: ``<shape>.trace-waits[-<class>][-warps].npz`` (one class; one row per warp)."""
    return f"{shape}.trace-waits" + ("" if classes == "all" else f"-{classes}") + ("-warps" if per_warp else "") + ".npz"
