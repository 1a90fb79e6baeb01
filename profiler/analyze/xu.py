"""The XU (MUFU) pipe's utilisation beside the tensor pipe's: when the exponential, not the tensor core, is the limit.

Attention's softmax needs one ``MUFU.EX2`` per score; the XU pipe executes 16 lanes per SM per cycle, so at head
dim 64 it is as busy as the tensor pipe (the H200 d64 profiles: XU 57.7%, tensor 55.8%). Two figures:

* ``xu_pipe_pct``: ncu's own ``sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active`` (the WhowaitsPipes
  section, or ncu's ComputeWorkloadAnalysis); null, with a ``missing`` entry and its reason, on reports that did
  not collect it.
* ``xu_pipe_pct_sass``: the same % from the SASS, for reports without the counter: the executed XU-pipe warp
  instructions (``data/gpus.toml``'s ``xu_pipe_opcodes``: MUFU, I2F, F2I, POPC, FLO; per-PC ``inst_executed``,
  else InstructionStats' per-opcode table) over ``xu_warp_inst_per_cycle_per_sm`` (0.5) x SM count x
  ``sm__cycles_active.avg``. On every committed report with both it equals ncu's figure to 1e-6
  (tests/test_xu_pipe.py); it is null on compute capabilities where that was not measured
  (``xu_pipe_measured_cc``).

Pure functions of a :class:`~profiler.report.Launch`.
"""

from __future__ import annotations

import math

import numpy as np

from profiler import metrics as M
from profiler.analyze import buildcache
from profiler.analyze._common import missing
from profiler.names import NO_SECTION

#: why ``xu_pipe_pct`` is null on a report that did not collect ncu's XU counter
NOT_COLLECTED = ("the report did not collect sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active "
                 "(whowaits' WhowaitsPipes section or ncu's ComputeWorkloadAnalysis collect it)")
#: why it is null where the report holds the metric without a value (ncu could not measure the launch)
NO_VALUE = "ncu recorded no value for sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active in this launch"


def xu_opcodes() -> frozenset[str]:
    """Base opcodes whose warp instructions ncu counts on the XU pipe (``data/gpus.toml``)."""
    return frozenset(M.gpus_config()["xu_pipe_opcodes"])


def xu_executed(launch) -> int | None:
    """Executed XU-pipe warp instructions: per-PC ``inst_executed`` of the XU opcodes summed, else the report's
    ``sass__inst_executed_per_opcode`` table; None when the report has neither."""
    ops = xu_opcodes()
    sass = launch.sass
    if len(sass) and "inst_executed" in sass.columns:
        ex = sass["inst_executed"]
        got = buildcache.codes(launch, "base") if ex.dtype == np.int64 else None
        if got is not None:  # integer sums: any order gives the same
            names, idx = got
            hit = np.fromiter((b in ops for b in names), dtype=bool, count=len(names))
            return int(ex.to_numpy()[hit[idx]].sum())
        return int(sass.loc[sass["base"].isin(ops), "inst_executed"].sum())
    table = launch.instances("sass__inst_executed_per_opcode")
    if table:
        return int(sum(v for op, v in table.items() if M.base_opcode(op) in ops))
    return None


def _cc(launch) -> str | None:
    major, _ = launch.get("cc_major")
    minor, _ = launch.get("cc_minor")
    return None if major is None or minor is None else f"{int(major)}.{int(minor)}"


def xu_pipe(launch) -> tuple[dict, list[dict]]:
    """``({xu_pipe_pct, xu_pipe_pct_sass}, missing entries)`` for one launch (see the module's doc)."""
    gone: list[dict] = []
    measured, _ = launch.get("xu_pipe_pct")
    if measured is None:
        spec = M.metric_spec("xu_pipe_pct")
        why = NO_VALUE if any(launch.has(n) for n in spec.names) else NOT_COLLECTED
        gone.append({**missing("xu_pipe_pct", spec.section), "reason": why})
    cfg = M.gpus_config()
    cc = _cc(launch)
    n = xu_executed(launch)
    sms, _ = launch.get("sm_count")
    cycles, _ = launch.get("sm_cycles_active")
    derived = None
    if n is None:
        gone.append({**missing("xu_pipe_pct_sass", "SourceCounters"),
                     "reason": "no executed-instruction counts per PC or per opcode"})
    elif cycles is None or sms is None:
        gone.append(missing("xu_pipe_pct_sass", M.metric_spec("sm_cycles_active" if cycles is None
                                                               else "sm_count").section))
    elif cc not in cfg["xu_pipe_measured_cc"]:
        gone.append({**missing("xu_pipe_pct_sass", NO_SECTION),
                     "reason": f"the XU pipe's opcodes and peak were measured on compute capability "
                               f"{', '.join(cfg['xu_pipe_measured_cc'])} only, not {cc}"})
    elif cycles > 0 and sms > 0:
        derived = 100.0 * n / (float(cfg["xu_warp_inst_per_cycle_per_sm"]) * float(sms) * float(cycles))
    else:
        gone.append({**missing("xu_pipe_pct_sass", NO_SECTION), "reason": "no active SM cycles"})
    return {"xu_pipe_pct": None if measured is None else float(measured), "xu_pipe_pct_sass": derived}, gone


def xu_figure(summary: dict) -> tuple[float | None, str | None]:
    """The XU pipe's % a view shows for a summary: ncu's counter (``"ncu"``) where the report has it, else the
    SASS-derived figure (``"sass"``); ``(None, None)`` with neither."""
    for key, source in (("xu_pipe_pct", "ncu"), ("xu_pipe_pct_sass", "sass")):
        v = summary.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            return float(v), source
    return None, None


def xu_busier(summary: dict) -> bool | None:
    """Whether the XU pipe is busier (a higher % of its own peak) than the tensor pipe: the exponential, not the
    tensor core, is then the pipe nearer its roof. None where either figure is unknown or the kernel runs no
    tensor instruction (``tensor_path`` ``none``: v01's CUDA-core attention has an idle tensor pipe, no rival)."""
    xu, _ = xu_figure(summary)
    tp = summary.get("tensor_pipe_pct")
    if xu is None or not isinstance(tp, (int, float)) or not math.isfinite(tp) or summary.get("tensor_path") == "none":
        return None
    return xu > tp


__all__ = ["NO_VALUE", "NOT_COLLECTED", "xu_busier", "xu_executed", "xu_figure", "xu_opcodes", "xu_pipe"]
