"""The summary of a launch: one typed schema for a single launch and for merged launches.

:class:`Summary` (a ``TypedDict``: the summary stays a plain dict, which is what ``whowaits show --format json``
prints; docs/contract.md) is produced by :func:`profiler.analyze.summarize_launch` for one launch and by
:func:`profiler.compare.merge.merge_launches` for several; both give every key below, with the same types
(``tests/test_schema.py`` holds them equal on real reports). A value a report cannot give is ``None`` and is
named in ``missing``; a merged summary has ``None`` where a per-launch value does not add up
(``launch_index``, ``launch``, ``stall_cycles_per_issue``, ``short_scoreboard.cycles_per_issue``).

:func:`validate_summary` checks an object against these types (the summary cache calls it before trusting
an entry); it raises :class:`SchemaError` naming the first offending path. Keys beyond the schema are
allowed (views added later), keys of the schema are required.
"""

from __future__ import annotations

import math
from collections.abc import Callable
import types
import functools
import typing
from typing import Any, NotRequired, Optional, TypedDict, Union

from profiler.errors import WhowaitsError

Num = Union[int, float]


class SchemaError(WhowaitsError, ValueError):
    """A summary that does not match :class:`Summary`; the message names the path (``roofline.bytes.l1``)."""


# --- records ----------------------------------------------------------------------------------------------
class ShortScoreboard(TypedDict):
    samples: Optional[int]
    share: Optional[float]
    cycles_per_issue: Optional[float]
    by_class: dict[str, int]  # opcode class -> SSC samples


class Barriers(TypedDict):
    static: Optional[dict[str, int]]  # opcode -> instructions in the SASS
    executed: Optional[dict[str, Optional[int]]]  # opcode -> warp-level executions


class TensorInst(TypedDict):
    hmma: Optional[int]
    hgmma: Optional[int]


class FlopsByPath(TypedDict):
    tensor_hmma: Optional[float]
    tensor_hgmma: Optional[float]
    fp32: Optional[float]
    fp16: Optional[float]


class Levels(TypedDict):
    l1: Optional[float]
    l2: Optional[float]
    dram: Optional[float]
    smem: Optional[float]


class Clocks(TypedDict):
    sm: Optional[float]  # compute roofs
    l1: Optional[float]
    l2: Optional[float]
    dram: Optional[float]
    smem: Optional[float]


class Ceilings(TypedDict):
    tensor_hmma_tflops: Optional[float]
    tensor_hgmma_tflops: Optional[float]
    fp32_tflops: Optional[float]
    fp16_tflops: Optional[float]
    compute_tflops: Optional[float]  # the roof of the compute pipe (no blend of pipes)
    tensor_tflops: Optional[float]  # the dense roof of the tensor path used
    tensor_dense_tflops: Optional[float]  # the GPU's dense tensor roof (wgmma on Hopper)
    bandwidth_bytes_per_s: Levels
    clock_hz: Clocks  # the clock each roof uses


class SmemOps(TypedDict):
    ld: Optional[float]
    st: Optional[float]
    ldsm: Optional[float]
    stsm: Optional[float]
    ldgsts: Optional[float]
    gmma: Optional[float]
    atom: Optional[float]


class Ldsm(TypedDict):
    wavefronts: Optional[float]
    bank_conflicts: Optional[float]
    ways: Optional[float]  # wavefronts / (wavefronts - conflicts): 1 = conflict-free


class Smem(TypedDict):
    bytes_by_op: SmemOps
    ldsm: Ldsm


class L2Reads(TypedDict):
    """The L2 read fan-out (``profiler.analyze.roofline.l2_reads``): null, with a ``missing`` reason, on reports
    that did not collect its counters (WhowaitsRoofline since commit fa07923)."""

    delivered_bytes: Optional[float]
    multicast_bytes: Optional[float]
    sectors: Optional[float]
    requests: Optional[float]
    miss_sectors: Optional[float]
    bytes: Optional[float]
    fanout: Optional[float]
    miss_share: Optional[float]
    multicast_share: Optional[float]


class Roofline(TypedDict):
    flops: Optional[float]
    flops_by_path: Optional[FlopsByPath]
    bytes: Levels
    intensity: Levels
    achieved_tflops: Optional[float]
    flops_tensor: Optional[float]
    intensity_tensor: Levels  # tensor FLOPs / bytes (ncu's roofline)
    achieved_tensor_tflops: Optional[float]
    compute_pipe: Optional[str]  # tensor | fp32 | fp16: the pipe carrying most FLOPs
    attainable_tflops: Levels
    ceilings: Optional[Ceilings]
    smem: Smem
    l2_reads: L2Reads  # the L2 read fan-out: SMs served per L2 read for the SMs


ClassRow = TypedDict("ClassRow", {"class": str, "samples": int, "share": float, "top_reason": Optional[str]})
WhoWaitsRow = TypedDict("WhoWaitsRow", {
    "class": str, "reason": str, "samples": int, "share": float,
    "top_opcode": Optional[str], "top_address": Optional[int], "top_sass": Optional[str],
    # of the samples, those on the kernel's exit path (idle warps: profiler.analyze.stalls.exit_tail); absent from
    # summaries written before it existed, which read as 0
    "at_exit": NotRequired[int]})
WaitsOnRow = TypedDict("WaitsOnRow", {
    "class": str, "opcode": str, "reason": str, "producer_class": str, "producer_opcode": str,
    "samples": float, "share": float})
TopInstruction = TypedDict("TopInstruction", {
    "address": int, "offset": int, "sass": str, "class": str, "samples": int, "top_reason": Optional[str],
    "kernel": Optional[str]})


class Region(TypedDict):
    name: str  # attention: load_q, load_kv, qk, softmax, pv, epilogue, sync, other; neutral: global_load,
    # shared_staging, mma, elementwise, reduction, store, sync, other (profiler/data/regions.toml)
    source: str  # declared | inferred
    vocabulary: str  # attention (exp of one MMA's result feeds another MMA, or declared so) | neutral
    stall_samples: dict[str, int]
    samples: int
    share: float
    inst_executed: int
    pcs: int
    inherited_samples: int


class RoleEdge(TypedDict):
    waiter: str  # a role (producer, consumer, cta, common, …)
    barrier: str  # mbarrier@0x440, mbarrier@0x400×2 (a ring), mbarrier+0x10 (unresolved kernels), bar 4, wgmma group, SB0
    releaser: str  # a role or an engine (TMA ← producer, tensor core (wgmma), cp.async (LDGSTS))
    samples: int
    share: float
    inferred: bool


OverlapSite = TypedDict("OverlapSite", {
    "group": str,  # wgmma | cp_async (data/overlap.toml)
    "address": int, "offset": int, "sass": str,
    "pending": int,  # N of the wait: at most N groups of this kind still pending after it
    "executed": Optional[int],  # warp-level executions of the wait
    "samples": int, "share": float, "top_reason": Optional[str],
    "commit_offsets": list[int],  # the commit(s) of the group this wait retires
    "overlap_static": dict[str, int],  # class -> instructions issued between that commit and the wait
    "overlap_executed": Optional[dict[str, int]],  # class -> their executions
    "next_offsets": list[int], "next_pending": list[int],  # the next waits of the kind on every path
    "next_lower": bool,  # every path reaches a wait with a smaller N next
    "between_static": dict[str, int], "between_executed": Optional[dict[str, int]],
    "between_work_executed": Optional[int],  # executions of counted (non-idle) instructions between
    "between_work": float,  # per execution of the wait (static count where it never ran)
    "collapsed": bool,  # N >= 1, a smaller N next, at most max_work between (profiler/analyze/overlap.py)
    "kernel": Optional[str]})


class Throughput(TypedDict):
    """DRAM and L2 traffic over the launch's time, and as a % of the peak bandwidth (``roofline.ceilings``);
    null where the bytes or the time are unknown (the % also where the peak is)."""

    dram_bytes_per_s: Optional[float]
    l2_bytes_per_s: Optional[float]
    dram_pct_of_peak: Optional[float]
    l2_pct_of_peak: Optional[float]


class Build(TypedDict):
    """Signs in the SASS of how the kernel was compiled (``profiler.analyze.summary.build_signs``)."""

    debug: Optional[bool]  # a -G (device debug) build: optimisations off; null without SASS
    self_moves: Optional[int]  # `MOV Rn, Rn` instructions: -G keeps them, an optimised build never has one
    instructions: Optional[int]


class Launch(TypedDict):
    index: int
    grid: Optional[list[int]]
    block: Optional[list[int]]
    cluster: Optional[list[int]]
    registers_per_thread: Optional[int]
    shared_mem_bytes: Optional[int]
    waves_per_sm: Optional[float]
    achieved_occupancy_pct: Optional[float]


class Device(TypedDict):
    name: Optional[str]
    cc: Optional[str]
    sm_count: Optional[int]


class Missing(TypedDict):
    field: str
    section: str


class Phase(TypedDict):
    name: str  # ramp | steady | tail
    share: float
    duration_ns: float


class Timeline(TypedDict):
    """PM sampling of one launch (``profiler.analyze.timeline.brief``); nulls and ``missing`` without it."""

    phases: Optional[list[Phase]]
    steady_tensor_pct: Optional[float]
    tail_share: Optional[float]
    ramp_share: Optional[float]
    duration_ns: Optional[float]
    interval_ns: Optional[float]
    activity: Optional[str]
    dip_share: NotRequired[Optional[float]]  # the steady state's dips (summaries before them lack both)
    dip_count: NotRequired[Optional[int]]
    curve: Optional[dict[str, Any]]
    missing: list[Missing]


class Summary(TypedDict):
    """One launch, or several merged (``whowaits show``'s object, docs/contract.md)."""

    report: Optional[str]
    launch_index: Optional[int]  # None when merged
    launch_indices: list[int]  # [launch_index] for one launch
    kernel: Optional[str]  # demangled; merged: distinct names joined by " + "
    duration_ns: Optional[float]
    stall_samples: Optional[dict[str, Optional[int]]]
    stall_share: Optional[dict[str, Optional[float]]]
    stall_cycles_per_issue: Optional[dict[str, Optional[float]]]
    short_scoreboard: ShortScoreboard
    barriers: Barriers
    tensor_pipe_pct: Optional[float]  # % of the tensor path's own peak
    xu_pipe_pct: Optional[float]  # XU (MUFU) pipe, % of its peak (ncu's counter)
    xu_pipe_pct_sass: Optional[float]  # the same from the SASS's executed XU instructions
    tensor_roof_pct: Optional[float]  # achieved tensor FLOP/s, % of the GPU's dense tensor roof (same clock)
    tensor_path: Optional[str]  # hmma | gmma | mixed | none | a+b (merged)
    tensor_inst: TensorInst
    roofline: Roofline
    opcode_waits: list[ClassRow]
    who_waits: list[WhoWaitsRow]
    waits_on: list[WaitsOnRow]  # every row, never truncated
    waits_on_unresolved: dict[str, float]
    top_instructions: list[TopInstruction]
    launch: Optional[Launch]  # None when merged (launches may differ)
    device: Optional[Device]
    regions: list[Region]  # sum exactly to the kernel's samples; [] without per-PC data; merged: by (name, source)
    role_edges: list[RoleEdge]  # whowaits roles' edges with samples, heaviest first (profiler/analyze/roles.py)
    timeline: Optional[Timeline]  # None when merged (a timeline belongs to one launch)
    overlap: Optional[list[OverlapSite]]  # async-group wait sites (profiler/analyze/overlap.py); None + missing without any
    throughput: Throughput  # DRAM / L2 bytes per second and % of peak
    build: Build  # -G debug build flagged from the SASS
    missing: list[Missing]


# --- validation -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _hints(tp) -> dict:
    """``typing.get_type_hints`` of a TypedDict, once per type (a summary check asked ~200 times)."""
    return typing.get_type_hints(tp)


def _is_typeddict(tp) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def _check(value: Any, tp, path: str) -> None:
    origin = typing.get_origin(tp)
    if origin is Union or isinstance(tp, types.UnionType):
        arms = typing.get_args(tp)
        if value is None and type(None) in arms:
            return
        errors = []
        for arm in (a for a in arms if a is not type(None)):
            try:
                _check(value, arm, path)
                return
            except SchemaError as err:
                errors.append(str(err))
        raise SchemaError(errors[0] if errors else f"summary {path}: expected one of {arms}")
    if tp is type(None):
        if value is not None:
            raise SchemaError(f"summary {path}: expected null, got {type(value).__name__}")
        return
    if tp is Any:
        return
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            raise SchemaError(f"summary {path or '(top)'}: expected an object, got {type(value).__name__}")
        hints = _hints(tp)
        for key in (k for k in hints if k in tp.__required_keys__):  # declaration order
            if key not in value:
                raise SchemaError(f"summary {path + '.' if path else ''}{key}: missing")
            _check(value[key], hints[key], f"{path + '.' if path else ''}{key}")
        return
    if origin is dict:
        kt, vt = typing.get_args(tp)
        if not isinstance(value, dict):
            raise SchemaError(f"summary {path}: expected an object, got {type(value).__name__}")
        for k, v in value.items():
            if not isinstance(k, str):
                raise SchemaError(f"summary {path}: key {k!r} is not a string")
            _check(v, vt, f"{path}.{k}")
        return
    if origin is list:
        (it,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise SchemaError(f"summary {path}: expected a list, got {type(value).__name__}")
        for i, v in enumerate(value):
            _check(v, it, f"{path}[{i}]")
        return
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not math.isfinite(value)):
            raise SchemaError(f"summary {path}: expected a finite number, got {value!r:.40}")
        return
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"summary {path}: expected an integer, got {value!r:.40}")
        return
    if tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(f"summary {path}: expected true or false, got {value!r:.40}")
        return
    if tp is str:
        if not isinstance(value, str):
            raise SchemaError(f"summary {path}: expected a string, got {type(value).__name__}")
        return
    raise TypeError(f"schema type {tp!r} at {path} is not supported")  # a bug in this module


@functools.lru_cache(maxsize=None)
def _valid(tp) -> Callable[[Any], bool]:
    """A predicate that is True only for values :func:`_check` accepts as ``tp``, compiled once per type
    (no paths, no messages: a valid summary, the usual case, is checked in a fraction of ``_check``'s time).
    False sends the value through :func:`_check`, which names what is wrong."""
    origin = typing.get_origin(tp)
    if origin is Union or isinstance(tp, types.UnionType):
        arms_all = typing.get_args(tp)
        none_ok = type(None) in arms_all
        arms = tuple(_valid(a) for a in arms_all if a is not type(None))
        return lambda v: (v is None and none_ok) or any(a(v) for a in arms)
    if tp is type(None):
        return lambda v: v is None
    if tp is Any:
        return lambda v: True
    if _is_typeddict(tp):
        hints = _hints(tp)
        fields = tuple((k, _valid(hints[k])) for k in hints if k in tp.__required_keys__)

        def typed(v) -> bool:
            if not isinstance(v, dict):
                return False
            for k, ok in fields:
                if k not in v or not ok(v[k]):
                    return False
            return True
        return typed
    if origin is dict:
        _, vt = typing.get_args(tp)
        ok_v = _valid(vt)
        return lambda v: isinstance(v, dict) and all(isinstance(k, str) and ok_v(x) for k, x in v.items())
    if origin is list:
        (it,) = typing.get_args(tp)
        ok_i = _valid(it)
        return lambda v: isinstance(v, list) and all(ok_i(x) for x in v)
    if tp is float:
        return lambda v: (not isinstance(v, bool) and isinstance(v, (int, float))
                          and (not isinstance(v, float) or math.isfinite(v)))
    if tp is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if tp is bool:
        return lambda v: isinstance(v, bool)
    if tp is str:
        return lambda v: isinstance(v, str)
    return lambda v: False  # _check raises its TypeError


def validate_summary(obj: Any) -> Summary:
    """``obj`` if it is a :class:`Summary` (every key, every type), else :class:`SchemaError` naming the
    first path that is wrong (e.g. ``summary roofline.bytes.l1: expected a finite number, got 'x'``)."""
    if not _valid(Summary)(obj):
        _check(obj, Summary, "")
    return obj


def validate_summaries(objs: Any) -> list[Summary]:
    """A list of summaries (one per launch, as :func:`profiler.analyze.summarize` returns)."""
    if not isinstance(objs, list):
        raise SchemaError(f"summaries: expected a list, got {type(objs).__name__}")
    for i, o in enumerate(objs):
        if _valid(Summary)(o):
            continue
        try:
            _check(o, Summary, "")
        except SchemaError as err:
            raise SchemaError(f"launch {i}: {err}") from None
    return objs


__all__ = ["OverlapSite", "SchemaError", "Summary", "validate_summaries", "validate_summary"]
