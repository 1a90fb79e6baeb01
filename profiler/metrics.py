"""Metric maps and opcode classes: the data files in ``profiler/data/`` read into Python.

This is the bottom layer: it imports nothing from the rest of ``profiler`` except the error
type, and never imports ``ncu_report``. Raw Nsight Compute metric names live in
``data/metrics.toml``; opcode classes in ``data/opcode_classes.toml``; GPU ceilings in
``data/gpus.toml``. Everything here is pure and cached.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from profiler.errors import WhowaitsError
from profiler.names import RATIO_ALIAS

__all__ = [
    "MetricSpec",
    "base_opcode",
    "barrier_opcodes",
    "classify_bases",
    "classify_opcode",
    "cycles_per_issue_metric",
    "full_opcode",
    "gpu_spec",
    "metric_spec",
    "metric_specs",
    "opcode_classes",
    "sampled_reasons",
    "stall_config",
    "stall_reasons",
    "tensor_op_counters",
    "is_pm_metric",
    "pm_base_name",
    "timeline_config",
    "timeline_series",
    "region_config",
]


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    path = resources.files("profiler") / "data" / name
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:  # pragma: no cover - packaging error
        raise WhowaitsError(f"data file {name} is missing from the installed package") from err
    except tomllib.TOMLDecodeError as err:  # pragma: no cover - caught by tests
        raise WhowaitsError(f"data file {name} is not valid TOML: {err}") from err


# --- metrics ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricSpec:
    """One canonical metric: the ncu names that can supply it (first present wins), its unit and
    the ncu section whose collection supplies it."""

    canonical: str
    names: tuple[str, ...]
    unit: str
    section: str
    kind: str = "number"  # or "text" (``kind`` in metrics.toml)


@lru_cache(maxsize=None)
def metric_specs() -> dict[str, MetricSpec]:
    """All canonical metrics of ``metrics.toml``, by canonical name."""
    out = {}
    for key, entry in _load("metrics.toml")["metric"].items():
        out[key] = MetricSpec(key, tuple(entry["names"]), entry.get("unit", ""), entry["section"],
                              entry.get("kind", "number"))
    return out


def metric_spec(canonical: str) -> MetricSpec:
    """The :class:`MetricSpec` for ``canonical``; ``KeyError`` for an unknown name (a bug)."""
    return metric_specs()[canonical]


@lru_cache(maxsize=None)
def stall_config() -> dict:
    """The ``[stalls]`` table of ``metrics.toml`` (prefixes, reasons, ratio aliases, sections)."""
    return _load("metrics.toml")["stalls"]


def stall_reasons() -> tuple[str, ...]:
    """ncu's stall reasons in metrics.toml's order (``gmma`` last: only some chips sample it)."""
    return tuple(stall_config()["reasons"])


def sampled_reasons(metric_names) -> list[str]:
    """Stall reasons a report samples, from its metric names: metrics.toml's reasons first (in
    order), then any other ``smsp__pcsamp_warps_issue_stalled_<reason>`` the chip's sampler has
    (newer GPUs add reasons), sorted."""
    cfg = stall_config()
    prefix, suffix = cfg["sample_prefix"], cfg["not_issued_suffix"]
    found = {
        n[len(prefix):]
        for n in metric_names
        if n.startswith(prefix) and not n.endswith(suffix) and "." not in n
    }
    known = stall_reasons()
    return [r for r in known if r in found] + sorted(found - set(known))


def cycles_per_issue_metric(reason: str) -> str:
    """The kernel-level ``…_per_issue_active.ratio`` metric for a sampler reason name
    (``warpgroup_arrive`` -> ``gmma``, ``no_instructions`` -> ``no_instruction`` on gh100)."""
    return stall_config()["cycles_per_issue"].format(reason=RATIO_ALIAS.get(reason, reason))


@lru_cache(maxsize=None)
def per_pc_metrics() -> dict[str, str]:
    """Per-PC (SourceCounters) metrics: sass-frame column -> ncu metric name."""
    return dict(_load("metrics.toml")["per_pc"])


@lru_cache(maxsize=None)
def tensor_op_counters() -> dict[str, tuple[tuple[str, ...], str]]:
    """Tensor FLOP counters per path (``hmma``, ``hgmma``): (dense counters, section)."""
    return {
        path: (tuple(entry["counters"]), entry["section"])
        for path, entry in _load("metrics.toml")["tensor_ops"].items()
    }


# --- PM sampling (timelines) -------------------------------------------------------------------


@lru_cache(maxsize=None)
def timeline_config() -> dict:
    """The ``[timeline]`` table of ``metrics.toml``."""
    return _load("metrics.toml")["timeline"]


@lru_cache(maxsize=None)
def _pm_name_re() -> re.Pattern:
    return re.compile(timeline_config()["pm_name"])


def is_pm_metric(name: str) -> bool:
    """Whether ncu metric ``name`` is a PM-sampled series (``TPC.TriageCompute.…``, ``pmsampling:…``)."""
    return _pm_name_re().match(name) is not None


def pm_base_name(name: str) -> str:
    """The counter name without its PM-sampling prefix: ``'TPC.TriageCompute.sm__cycles_active.avg'``
    and ``'pmsampling:sm__cycles_active.avg'`` -> ``'sm__cycles_active.avg'``."""
    m = _pm_name_re().match(name)
    return name[m.end():] if m else name


def timeline_series(metric_names) -> dict[str, str]:
    """Series name -> ncu metric name for the PM-sampled metrics among ``metric_names``: the series of
    ``[timeline.series]`` (the first listed base name present wins; where a counter is there under both a
    chip-domain name and the generic ``pmsampling:`` alias, the chip-domain one), then ``warps_<reason>`` for every warp-state series (``…smsp__warps_issue_stalled_<reason>…``), in the
    stall-reason order of metrics.toml."""
    cfg = timeline_config()
    by_base: dict[str, str] = {}
    for n in sorted(metric_names, key=lambda n: (n.startswith("pmsampling:"), n)):
        if is_pm_metric(n):
            by_base.setdefault(pm_base_name(n), n)
    out: dict[str, str] = {}
    for series, bases in cfg["series"].items():
        for b in bases:
            if b in by_base:
                out[series] = by_base[b]
                break
    prefix = cfg["warp_state_prefix"]
    warps = {}
    for base, n in by_base.items():
        if base.startswith(prefix):
            reason = base[len(prefix):].split(".", 1)[0]
            warps[reason] = n
    order = {r: i for i, r in enumerate(stall_reasons())}
    for reason in sorted(warps, key=lambda r: (order.get(r, len(order)), r)):
        out[f"warps_{reason}"] = warps[reason]
    return out


@lru_cache(maxsize=None)
def region_config() -> dict:
    """``data/regions.toml``: the region vocabulary, the marker syntax and the SASS inference rules."""
    return _load("regions.toml")


# --- opcodes ------------------------------------------------------------------------------------

_PRED = re.compile(r"^\s*(?:@!?U?P[T0-9]+\s+)?")


def full_opcode(sass: str) -> str:
    """The mnemonic with its modifiers: ``'@!UP1 SYNCS.EXCH.64 URZ, [UR6], UR4'`` ->
    ``'SYNCS.EXCH.64'``. Empty string for empty text."""
    text = _PRED.sub("", sass, count=1)
    tokens = text.split(None, 1)
    return tokens[0].rstrip(";") if tokens else ""


def base_opcode(sass_or_opcode: str) -> str:
    """The base opcode (before the first '.'): ``'HGMMA.64x128x16.F32 R24, …'`` -> ``'HGMMA'``."""
    op = full_opcode(sass_or_opcode)
    return op.split(".", 1)[0]


@lru_cache(maxsize=None)
def opcode_classes() -> dict[str, dict]:
    """Classes of ``opcode_classes.toml`` in display order: name -> {description, opcodes}."""
    return dict(_load("opcode_classes.toml")["classes"])


@lru_cache(maxsize=None)
def _class_of_base() -> dict[str, str]:
    out: dict[str, str] = {}
    for cls, entry in opcode_classes().items():
        for op in entry["opcodes"]:
            if op in out and out[op] != cls:  # pragma: no cover - guarded by a test
                raise WhowaitsError(f"opcode {op} is in two classes: {out[op]} and {cls}")
            out[op] = cls
    return out


def classify_opcode(opcode: str) -> str:
    """Opcode class of a SASS opcode or line (match on the base opcode); ``OTHER`` if unknown."""
    return _class_of_base().get(base_opcode(opcode), "OTHER")


def classify_bases(bases) -> list[str]:
    """:func:`classify_opcode` of each of ``bases``, base opcodes already split off their text (the
    ingester's per-slot column: one dict lookup a slot instead of a parse)."""
    get = _class_of_base().get
    return [get(b, "OTHER") for b in bases]


def known_base_opcodes() -> frozenset[str]:
    """Every base opcode the class map names explicitly (``OTHER``'s included)."""
    return frozenset(_class_of_base())


@lru_cache(maxsize=None)
def barrier_opcodes() -> frozenset[str]:
    """Base opcodes of barrier-type instructions (``[barriers]`` of ``opcode_classes.toml``)."""
    return frozenset(_load("opcode_classes.toml")["barriers"]["opcodes"])


@lru_cache(maxsize=None)
def exit_tail_opcodes() -> frozenset[str]:
    """Base opcodes of a kernel's exit path (``[exit_tail]`` of ``opcode_classes.toml``: the run that ends in an
    EXIT, where warps with no work left wait for the others; :func:`profiler.analyze.stalls.exit_tail`)."""
    return frozenset(_load("opcode_classes.toml")["exit_tail"]["opcodes"])


# --- GPUs ---------------------------------------------------------------------------------------


def gpus_config() -> dict:
    """``data/gpus.toml`` whole: per-chip entries and the chip-independent facts at its top."""
    return _load("gpus.toml")


def gpu_spec(device_name: str | None) -> tuple[str, dict] | None:
    """The ``gpus.toml`` entry whose ``match`` regex finds ``device_name``: (chip, entry), or
    ``None`` when no entry matches (ceilings then come only from the report itself)."""
    if not device_name:
        return None
    for chip, entry in _load("gpus.toml").items():
        if isinstance(entry, dict) and re.search(entry["match"], device_name):
            return chip, entry
    return None
