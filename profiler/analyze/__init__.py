"""Single-launch analyses: pure functions of a :class:`profiler.report.Launch`.

Each returns a DataFrame whose columns its docstring lists (absent inputs are NaN/<NA>/None,
and ``frame.attrs["missing"]`` names the field and the ncu section that would supply it), except
:func:`summarize_launch` / :func:`summarize`, which return the launch summaries of docs/contract.md.
"""

from profiler.analyze.kernel import barriers, launch_stats, roofline, tensor_util
from profiler.analyze.producers import producer_pcs, waits_on
from profiler.analyze.stalls import (
    opcode_waits,
    short_scoreboard,
    stall_breakdown,
    top_instructions,
    who_waits,
)
from profiler.analyze.summary import summarize, summarize_launch
from profiler.analyze.timeline import timeline, timelines

__all__ = [
    "barriers",
    "launch_stats",
    "opcode_waits",
    "producer_pcs",
    "roofline",
    "short_scoreboard",
    "stall_breakdown",
    "summarize",
    "summarize_launch",
    "tensor_util",
    "timeline",
    "timelines",
    "top_instructions",
    "waits_on",
    "who_waits",
]
